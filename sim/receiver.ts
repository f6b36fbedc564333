/**
 * The simulation's webhook receiver: a tenant's endpoint that fails while faults are on (a 500, a
 * cut connection, an answer that comes after the sender gave up) and recovers after the heal. It
 * keeps every request it accepted, so the oracle can count deliveries per event (V5) and find the
 * events that never arrived (V3).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook } from '../src/events/webhooks.ts';

export type ReceiverReply = 'ok' | '500' | 'reset' | 'late';

export interface Receipt {
  endpoint: string;
  /** `webhook-id`: the event's id, the same on every retry of one delivery. */
  id: string;
  type: string;
  meetingId: string | null;
  revision: number | null;
}

export interface Receiver {
  /** The URL of one named endpoint at this receiver. */
  urlFor(endpoint: string): string;
  /** Its signing secret, once the service has told it (POST /v1/webhooks). */
  setSecret(endpoint: string, secret: string): void;
  /** Requests answered 2xx (a late answer counts: the receiver took it, the sender never heard). */
  receipts: Receipt[];
  /** Requests refused, by how; and requests whose signature did not verify. */
  faults: Map<ReceiverReply, number>;
  badSignatures: number;
  close(): Promise<void>;
}

export async function startReceiver(decide: () => ReceiverReply, lateMs: number): Promise<Receiver> {
  const secrets = new Map<string, string>();
  const receipts: Receipt[] = [];
  const faults = new Map<ReceiverReply, number>();
  let badSignatures = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const endpoint = (req.url ?? '').replace(/^\/hook\//, '');
      const body = Buffer.concat(chunks).toString('utf8');
      const secret = secrets.get(endpoint);
      const headers = req.headers as Record<string, string | undefined>;
      if (!secret || !verifyWebhook(secret, headers, body)) {
        badSignatures++;
        res.writeHead(401).end();
        return;
      }
      const reply = decide();
      if (reply !== 'ok') faults.set(reply, (faults.get(reply) ?? 0) + 1);
      if (reply === '500') return void res.writeHead(500).end('receiver down');
      if (reply === 'reset') return void req.socket.destroy();
      const parsed = JSON.parse(body) as { type: string; data: { meetingId?: string; revision?: number } };
      receipts.push({
        endpoint,
        id: String(headers['webhook-id']),
        type: parsed.type,
        meetingId: parsed.data.meetingId ?? null,
        revision: typeof parsed.data.revision === 'number' ? parsed.data.revision : null,
      });
      if (reply === 'late') setTimeout(() => res.writeHead(200).end(), lateMs).unref();
      else res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    urlFor: (endpoint) => `http://127.0.0.1:${port}/hook/${endpoint}`,
    setSecret: (endpoint, secret) => secrets.set(endpoint, secret),
    receipts,
    faults,
    get badSignatures() {
      return badSignatures;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
