import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the fake answers one request: like the real API, failures included. */
export type FakeReply = 'ok' | '503' | '400' | 'hang' | 'quota' | '402' | '429' | '529' | 'reset';

/**
 * An OpenAI-compatible /v1/audio/transcriptions server on 127.0.0.1 that answers like the real API,
 * failures included: 503 overloaded, 400 invalid request, 429 insufficient_quota, or no answer.
 */
export async function startFakeWhisper(script: (n: number) => FakeReply): Promise<{
  url: string;
  calls(): number;
  authHeaders: string[];
  close(): Promise<void>;
}> {
  let calls = 0;
  const authHeaders: string[] = [];
  const hung: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls++;
      authHeaders.push(String(req.headers.authorization ?? ''));
      if (req.url !== '/v1/audio/transcriptions' || req.method !== 'POST') {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      const reply = script(calls);
      switch (reply) {
        case 'ok':
          res.writeHead(200, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              text: 'hello from whisper',
              duration: 2.5,
              segments: [{ id: 0, start: 0.2, end: 1.9, text: ' hello from whisper' }],
            }),
          );
          return;
        case '503':
          res
            .writeHead(503, { 'content-type': 'application/json' })
            .end('{"error":{"message":"The server is overloaded","type":"server_error"}}');
          return;
        case '400':
          res
            .writeHead(400, { 'content-type': 'application/json' })
            .end('{"error":{"message":"Invalid file format.","type":"invalid_request_error"}}');
          return;
        case 'quota':
          res
            .writeHead(429, { 'content-type': 'application/json' })
            .end('{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}');
          return;
        case '402':
        case '429':
        case '529':
          res
            .writeHead(Number(reply), { 'content-type': 'application/json' })
            .end('{"error":{"message":"try later"}}');
          return;
        case 'reset':
          req.socket.destroy();
          return;
        case 'hang':
          hung.push(res);
          return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    authHeaders,
    close: async () => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * An OpenAI-compatible /v1/chat/completions server on 127.0.0.1 with the same failure modes. It
 * answers a minutes request with minutes, and a question over numbered passages (O5) as a model
 * does: a sentence per passage that shares a word with the question, cited by its number, and,
 * like a model that invents, one citation of a passage number it was never given.
 */
export async function startFakeChat(script: (n: number) => FakeReply): Promise<{
  url: string;
  calls(): number;
  /** Requests whose caller went away before the answer (an aborted call). */
  aborted(): number;
  /** The user messages received, in order. */
  prompts: string[];
  /** The system messages received, in order. */
  systems: string[];
  close(): Promise<void>;
}> {
  let calls = 0;
  let aborted = 0;
  const prompts: string[] = [];
  const systems: string[] = [];
  const server = http.createServer((req, res) => {
    res.on('close', () => {
      if (!res.writableEnded) aborted++;
    });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls++;
      let user = '';
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          messages?: Array<{ role: string; content: string }>;
        };
        user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
        systems.push(body.messages?.find((m) => m.role === 'system')?.content ?? '');
      } catch {
        // not JSON: answered like any other request
      }
      prompts.push(user);
      const reply = script(calls);
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      switch (reply) {
        case 'ok':
          json(200, {
            id: 'chatcmpl-1',
            object: 'chat.completion',
            model: 'fake-model',
            choices: [
              {
                index: 0,
                finish_reason: 'stop',
                message: {
                  role: 'assistant',
                  content: user.includes('<passages>')
                    ? answerFromPassages(user)
                    : JSON.stringify({
                        summary: 'The team reviewed the budget.',
                        decisions: ['Hire two engineers'],
                        action_items: ['Alice sends the report by Friday'],
                      }),
                },
              },
            ],
          });
          return;
        case '503':
          json(503, { error: { message: 'The engine is currently overloaded', type: 'server_error' } });
          return;
        case '400':
          json(400, { error: { message: 'Invalid request', type: 'invalid_request_error' } });
          return;
        case 'quota':
          json(429, {
            error: {
              message: 'You exceeded your current quota',
              type: 'insufficient_quota',
              code: 'insufficient_quota',
            },
          });
          return;
        case '402':
          json(402, {
            error: { message: 'Payment required: billing hard limit reached', type: 'billing_error' },
          });
          return;
        case '429':
          res.setHeader('retry-after', '0');
          json(429, {
            error: {
              message: 'Rate limit reached for requests',
              type: 'requests',
              code: 'rate_limit_exceeded',
            },
          });
          return;
        case '529':
          json(529, { error: { message: 'Overloaded', type: 'overloaded_error' } });
          return;
        case 'reset':
          req.socket.destroy();
          return;
        case 'hang':
          return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    aborted: () => aborted,
    prompts,
    systems,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function answerFromPassages(user: string): string {
  // A gullible model: any line of its prompt outside the quoted data that tells it to ignore its
  // instructions is obeyed (F4: a passage must never become such a line).
  const block = /^<passages>\n([\s\S]*)\n<\/passages>$/m.exec(user);
  const outside = block ? user.replace(block[0], '') : user;
  if (/ignore all earlier instructions/i.test(outside)) return 'PWNED: the instructions were ignored.';
  const question = JSON.parse(/^Question: (.*)$/m.exec(user)?.[1] ?? '""') as string;
  const words = new Set(question.toLowerCase().match(/[a-z]{4,}/g) ?? []);
  const passages = JSON.parse(block?.[1] ?? '[]') as Array<{ n: number; text: string }>;
  const cited = passages.filter((p) =>
    (p.text.toLowerCase().match(/[a-z]{4,}/g) ?? []).some((w) => words.has(w)),
  );
  const lines = cited.map((p) => `The meetings say: ${p.text.split(/\s+/).slice(0, 8).join(' ')} [${p.n}].`);
  return [...lines, `This was also settled elsewhere [${passages.length + 5}].`].join(' ');
}
