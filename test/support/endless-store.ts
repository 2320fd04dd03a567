// A store that streams without end, as a broken or hostile one does: it answers the model cache's
// one-byte question (206, a size of 1) and then, to the fetch, 200 with bytes that never stop and no
// length. It counts what it was asked and what it wrote.
import http from 'node:http';

export interface EndlessStore {
  endpoint: string;
  requests: number;
  /** Bytes handed to the socket. */
  sent: number;
  stop(): void;
}

export async function startEndlessStore(host = '127.0.0.1'): Promise<EndlessStore> {
  const counts = { requests: 0, sent: 0 };
  const server = http.createServer((req, res) => {
    counts.requests++;
    if (req.headers.range === 'bytes=0-0') {
      res.writeHead(206, { etag: '"endless"', 'content-range': 'bytes 0-0/1' });
      return res.end('x');
    }
    res.writeHead(200, { etag: '"endless"' });
    const chunk = Buffer.alloc(2 ** 20);
    const more = () => {
      for (let ok = true; ok; counts.sent += chunk.length) ok = res.write(chunk);
    };
    res.on('drain', more);
    res.on('close', () => res.off('drain', more));
    more();
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as { port: number }).port;
  return {
    endpoint: `http://${host}:${port}`,
    get requests() {
      return counts.requests;
    },
    get sent() {
      return counts.sent;
    },
    stop() {
      server.closeAllConnections();
      server.close();
    },
  };
}
