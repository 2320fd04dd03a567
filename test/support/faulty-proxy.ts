// A TCP proxy in front of a real server that can cut the network the ways networks fail: connections
// reset (the peer restarted), or connections that go silent without any close (a dead NAT entry or
// a vanished host). TLS passes through untouched.
import net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream?: net.Socket;
  /** Silenced: bytes are swallowed both ways and neither side learns of the other's close. */
  dead: boolean;
}

export class FaultyProxy {
  private mode: 'forward' | 'reset' | 'silent' = 'forward';
  private readonly pairs = new Set<Pair>();
  /** Connections accepted so far: a client that pools connections opens few. */
  accepted = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {
    server.on('connection', (client) => this.accept(client));
  }

  static async start(target: { host: string; port: number }): Promise<FaultyProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new FaultyProxy(server, (server.address() as net.AddressInfo).port, target);
  }

  private accept(client: net.Socket): void {
    this.accepted++;
    client.on('error', () => undefined);
    if (this.mode === 'reset') return void client.resetAndDestroy();
    const pair: Pair = { client, dead: this.mode === 'silent' };
    this.pairs.add(pair);
    client.on('close', () => this.pairs.delete(pair));
    if (pair.dead) return void client.on('data', () => undefined);
    const upstream = net.connect(this.target.port, this.target.host);
    pair.upstream = upstream;
    upstream.on('error', () => undefined);
    client.pipe(upstream);
    upstream.pipe(client);
    const hangUp = (other: net.Socket) => () => {
      if (!pair.dead) other.destroy();
    };
    client.on('close', hangUp(upstream));
    upstream.on('close', hangUp(client));
  }

  /** Every open connection is reset and new ones are refused, as when the server restarts. */
  reset(): void {
    this.mode = 'reset';
    for (const p of this.pairs) {
      p.client.resetAndDestroy();
      p.upstream?.destroy();
    }
  }

  /** Every open connection goes silent for good, and new ones get no answer. */
  silence(): void {
    this.mode = 'silent';
    for (const p of this.pairs) {
      p.dead = true;
      if (p.upstream) {
        p.client.unpipe(p.upstream);
        p.upstream.unpipe(p.client);
        p.upstream.on('data', () => undefined);
      }
      p.client.on('data', () => undefined);
    }
  }

  /** New connections work again; connections that went silent stay dead, as they would. */
  heal(): void {
    this.mode = 'forward';
  }

  async close(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream?.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
