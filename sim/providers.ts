/**
 * The providers at the network boundary, for the simulation: a Whisper-compatible recogniser that
 * names which chunk and how many samples each stretch came from (test/support/chunk-recognizer.ts),
 * and an OpenAI-compatible chat endpoint. Each request asks `decide` how to answer, so the driver
 * injects the provider's failure modes from its seed while faults are on: 5xx, 429 with
 * Retry-After, a quota error, a reset connection, and an answer that never comes (the client's own
 * timeout ends it).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseWav } from '../src/domain/wav.ts';
import { runsOf } from '../test/support/chunk-recognizer.ts';

export type ProviderReply = 'ok' | '503' | '429' | 'quota' | 'reset' | 'hang';

export interface FakeProvider {
  url: string;
  calls(): number;
  faults(): Map<ProviderReply, number>;
  close(): Promise<void>;
}

async function serve(
  decide: () => ProviderReply,
  answer: (body: Buffer, req: http.IncomingMessage) => Promise<{ status: number; json: unknown }>,
): Promise<FakeProvider> {
  let calls = 0;
  const faults = new Map<ProviderReply, number>();
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (c: Buffer) => body.push(c));
    req.on('end', () => {
      calls++;
      const reply = decide();
      if (reply !== 'ok') faults.set(reply, (faults.get(reply) ?? 0) + 1);
      const json = (status: number, value: unknown, headers: Record<string, string> = {}) =>
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
      switch (reply) {
        case '503':
          return json(503, { error: { message: 'The server is overloaded', type: 'server_error' } });
        case '429':
          return json(
            429,
            { error: { message: 'Rate limit reached', type: 'requests' } },
            { 'retry-after': '1' },
          );
        case 'quota':
          return json(429, {
            error: {
              message: 'You exceeded your current quota',
              type: 'insufficient_quota',
              code: 'insufficient_quota',
            },
          });
        case 'reset':
          req.socket.destroy();
          return;
        case 'hang':
          // Never answered: the caller's timeout ends it; the socket goes when the caller gives up.
          return;
        case 'ok':
          answer(Buffer.concat(body), req)
            .then((a) => json(a.status, a.json))
            .catch((err: unknown) => json(500, { error: { message: String(err) } }));
          return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    faults: () => faults,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Whisper: each run of one chunk's samples becomes a segment `c<seq>x<samples>`. */
export function startRecognizer(decide: () => ProviderReply): Promise<FakeProvider> {
  return serve(decide, async (body, req) => {
    const form = await new Response(body, {
      headers: { 'content-type': String(req.headers['content-type']) },
    }).formData();
    const file = form.get('file');
    const wav = file instanceof Blob ? parseWav(Buffer.from(await file.arrayBuffer())) : null;
    if (!wav) return { status: 400, json: { error: { message: 'Invalid file format.' } } };
    const segments = runsOf(wav.samples).map(([seq, from, count], id) => ({
      id,
      start: from / 16_000,
      end: (from + count) / 16_000,
      text: ` c${seq}x${count}`,
    }));
    return {
      status: 200,
      json: { text: segments.map((s) => s.text).join(''), duration: wav.samples.length / 16_000, segments },
    };
  });
}

/** Chat completions: a fixed, well-formed set of minutes. */
export function startChat(decide: () => ProviderReply): Promise<FakeProvider> {
  return serve(decide, () =>
    Promise.resolve({
      status: 200,
      json: {
        id: 'chatcmpl-sim',
        object: 'chat.completion',
        choices: [
          {
            index: 0,
            finish_reason: 'stop',
            message: {
              role: 'assistant',
              content: JSON.stringify({ summary: 'A simulated meeting.', decisions: [], action_items: [] }),
            },
          },
        ],
      },
    }),
  );
}
