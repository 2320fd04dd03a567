// The CSI specification's and the kubelet's plugin-registration .proto files, loaded as they are
// (src/csi/proto/README.md), and a server on a Unix socket.
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const protoDir = fileURLToPath(new URL('./proto/', import.meta.url));

type Services = Record<string, grpc.ServiceDefinition>;

function load(file: string): grpc.GrpcObject {
  const definition = protoLoader.loadSync(file, {
    includeDirs: [protoDir],
    // The wire's own field names (volume_id, target_path), as the specification writes them.
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition);
}

/** csi.v1.Identity and csi.v1.Node. */
export function csiServices(): Services {
  const csi = (load('csi.proto').csi as grpc.GrpcObject).v1 as grpc.GrpcObject;
  return {
    Identity: (csi.Identity as grpc.ServiceClientConstructor).service,
    Node: (csi.Node as grpc.ServiceClientConstructor).service,
  };
}

/** The kubelet's pluginregistration.Registration. */
export function registrationService(): grpc.ServiceDefinition {
  const reg = load('pluginregistration.proto').pluginregistration as grpc.GrpcObject;
  return (reg.Registration as grpc.ServiceClientConstructor).service;
}

/** Clients for tests and probes: the same definitions, as the kubelet would call them. */
export function csiClients(socket: string) {
  const csi = (load('csi.proto').csi as grpc.GrpcObject).v1 as grpc.GrpcObject;
  const reg = load('pluginregistration.proto').pluginregistration as grpc.GrpcObject;
  const creds = grpc.credentials.createInsecure();
  const address = `unix://${socket}`;
  return {
    identity: new (csi.Identity as grpc.ServiceClientConstructor)(address, creds),
    node: new (csi.Node as grpc.ServiceClientConstructor)(address, creds),
    registration: new (reg.Registration as grpc.ServiceClientConstructor)(address, creds),
  };
}

/** Serves `services` on a Unix socket, replacing a socket an earlier run left. */
export async function serveOnSocket(
  socket: string,
  services: [grpc.ServiceDefinition, grpc.UntypedServiceImplementation][],
): Promise<grpc.Server> {
  // sun_path holds 108 bytes with its NUL: a longer path fails to bind with a bare EINVAL.
  if (Buffer.byteLength(socket) > 107)
    throw new Error(`the socket path ${socket} is ${Buffer.byteLength(socket)} bytes, more than a Unix socket's 107`);
  await rm(socket, { force: true });
  const server = new grpc.Server();
  for (const [definition, implementation] of services) server.addService(definition, implementation);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  return server;
}

export { grpc };
