import net, { type AddressInfo } from 'node:net';

/** A receiver that accepts connections and never answers: a black-holed endpoint. */
export async function startBlackHole() {
  const sockets = new Set<net.Socket>();
  let most = 0;
  let ever = 0;
  const server = net.createServer((s) => {
    sockets.add(s);
    ever++;
    most = Math.max(most, sockets.size);
    // Read (and drop) what it is sent, so a client that gives up is seen to close.
    s.resume();
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: (n: number) => `http://127.0.0.1:${port}/hole/${n}`,
    most: () => most,
    ever: () => ever,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
