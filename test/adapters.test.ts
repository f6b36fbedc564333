import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AppError, ErrorKind } from '../src/domain/errors.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { FfmpegAudioDecoder } from '../src/adapters/ffmpeg-audio-decoder.ts';
import {
  PocketsphinxTranscriber,
  parsePocketsphinxOutput,
} from '../src/adapters/pocketsphinx-transcriber.ts';
import { WhisperTranscriber } from '../src/adapters/whisper-transcriber.ts';
import { OpenAiMinutesWriter } from '../src/adapters/openai-minutes-writer.ts';
import { ExtractiveMinutesWriter, EXTRACTIVE_NOTE } from '../src/adapters/extractive-minutes-writer.ts';
import { classifyHttpFailure, parseRetryAfter } from '../src/adapters/provider-http.ts';
import { waitFor } from './support/harness.ts';

const run = promisify(execFile);
const ffmpeg = 'ffmpeg';
let dir = '';

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'verbatim-adapters-test-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof AppError, `expected AppError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a rejection');
}

function sine(seconds: number, rate = 16_000): Int16Array {
  return Int16Array.from({ length: Math.round(seconds * rate) }, (_, i) =>
    Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)),
  );
}

void describe('FfmpegAudioDecoder', () => {
  const decoder = new FfmpegAudioDecoder();

  void it('decodes a WAV to 16 kHz mono', async () => {
    const audio = await decoder.decode(encodeWav(sine(1.5, 44_100), 44_100));
    assert.equal(audio.sampleRate, 16_000);
    assert.ok(Math.abs(audio.samples.length - 24_000) <= 16, `got ${audio.samples.length}`);
  });

  for (const [ext, codec] of [
    ['mp3', 'libmp3lame'],
    ['ogg', 'libvorbis'],
    ['m4a', 'aac'], // moov atom at the end: only readable from a seekable file
  ] as const) {
    void it(`decodes ${ext}`, async () => {
      const file = join(dir, `tone.${ext}`);
      const args = '-hide_banner -loglevel error -y -f lavfi -i sine=frequency=440:duration=2 -ac 2 -c:a';
      await run(ffmpeg, [...args.split(' '), codec, file]);
      const audio = await decoder.decode(await readFile(file));
      assert.ok(Math.abs(audio.samples.length - 32_000) <= 2_000, `got ${audio.samples.length}`);
    });
  }

  void it('rejects garbage as permanent audio.undecodable', async () => {
    const err = await rejection(
      decoder.decode(Buffer.from('this is not audio, just some text bytes'.repeat(20))),
    );
    assert.deepEqual([err.kind, err.code], [ErrorKind.permanent, 'audio.undecodable']);
    assert.ok(!err.message.includes(tmpdir()), err.message);
  });

  void it('reports a missing ffmpeg as audio.decoder_missing', async () => {
    const err = await rejection(
      new FfmpegAudioDecoder({ ffmpegPath: '/nonexistent/ffmpeg' }).decode(encodeWav(sine(0.1), 16_000)),
    );
    assert.deepEqual([err.kind, err.code], [ErrorKind.permanent, 'audio.decoder_missing']);
  });
});

void describe('PocketsphinxTranscriber', () => {
  void it('A7: transcribes synthesised English speech offline', async () => {
    const speech = join(dir, 'speech.wav');
    const text = 'the budget meeting will discuss the marketing plan';
    await run('flite', [...'-voice rms --setf duration_stretch=1.2 -o'.split(' '), speech, '-t', text]);
    const audio = await new FfmpegAudioDecoder().decode(await readFile(speech));
    const segments = await new PocketsphinxTranscriber().transcribe({
      wav: encodeWav(audio.samples, audio.sampleRate),
      language: 'en',
    });
    const heard = segments.map((s) => s.text).join(' ');
    assert.match(heard, /\bbudget\b/);
    assert.match(heard, /\bmarketing\b/);
    assert.doesNotMatch(heard, /<|\[|\(\d\)/);
    for (const s of segments) assert.ok(s.endMs >= s.startMs && s.startMs >= 0);
  });

  void it("L22: the drafts' quicker search still hears the words, with timings", async () => {
    const speech = join(dir, 'speech-fast.wav');
    const text = 'the engineering team will hire two more engineers before the summer';
    await run('flite', [...'-voice rms --setf duration_stretch=1.2 -o'.split(' '), speech, '-t', text]);
    const audio = await new FfmpegAudioDecoder().decode(await readFile(speech));
    const segments = await new PocketsphinxTranscriber({ fast: true }).transcribe({
      wav: encodeWav(audio.samples, audio.sampleRate),
      language: 'en',
    });
    const heard = segments.map((s) => s.text).join(' ');
    assert.match(heard, /\bengineering\b/);
    assert.match(heard, /\bsummer\b/);
    assert.ok(segments.length > 0 && segments.every((s) => s.endMs > s.startMs && s.startMs >= 0));
    assert.ok(segments.at(-1)!.endMs > 2000, 'word timings survive the single-pass search');
  });

  void it('L22: a draft recogniser kept warm hears the same words as a cold start, replaces a spare that died, and leaves none behind', async () => {
    const speech = join(dir, 'speech-warm.wav');
    const text = 'the engineering team will hire two more engineers before the summer';
    await run('flite', [...'-voice rms --setf duration_stretch=1.2 -o'.split(' '), speech, '-t', text]);
    const audio = await new FfmpegAudioDecoder().decode(await readFile(speech));
    const wav = encodeWav(audio.samples, audio.sampleRate);
    const cold = await new PocketsphinxTranscriber({ fast: true }).transcribe({ wav, language: 'en' });
    // The recogniser processes waiting for their audio on stdin, children of this test.
    const spares = async () => {
      const { stdout } = await run('ps', ['--ppid', String(process.pid), '-o', 'pid=,args=']).catch(() => ({
        stdout: '',
      }));
      return stdout
        .split('\n')
        .filter((l) => l.includes('pocketsphinx') && l.includes('/dev/stdin'))
        .map((l) => Number(l.trim().split(/\s+/)[0]));
    };
    const warm = new PocketsphinxTranscriber({ fast: true, warm: true });
    try {
      assert.deepEqual(await warm.transcribe({ wav, language: 'en' }), cold, 'the first run (no spare yet)');
      const [first] = await spares();
      assert.ok(first, 'a spare waits after a run');
      assert.deepEqual(
        await warm.transcribe({ wav, language: 'en' }),
        cold,
        'a run on the spare: the same words',
      );
      const [second] = await spares();
      assert.ok(second && second !== first, 'the spare was used and a new one waits');
      // The recogniser of the spare dies while it waits (the out-of-memory killer, an operator).
      const { stdout } = await run('ps', ['--ppid', String(second), '-o', 'pid=,comm=']);
      const recogniser = stdout.split('\n').find((l) => l.includes('pocketsphinx'));
      assert.ok(recogniser, `the spare's recogniser runs (${stdout})`);
      process.kill(Number(recogniser.trim().split(/\s+/)[0]), 'SIGKILL');
      assert.deepEqual(
        await warm.transcribe({ wav, language: 'en' }),
        cold,
        'a dead spare: a cold run instead',
      );
      const third = await spares();
      assert.ok(third.length === 1 && third[0] !== second, 'and one new spare again');
    } finally {
      await warm.close();
    }
    await waitFor('no spare left', async () => (await spares()).length === 0);
  });

  void it("W2: parses word timings, dropping fillers and alternate pronunciations, and keeps each word's times", () => {
    const out = `we will meet
<s> 0.000 0.160 0.999800
we 0.170 0.430 0.97
will(2) 0.440 0.970 0.99
<sil> 0.970 1.800 1.0
[NOISE] 1.800 1.900 1.0
++BREATH++ 1.900 2.000 1.0
meet 2.000 2.500 0.9
</s> 2.500 2.600 1.0`;
    assert.deepEqual(parsePocketsphinxOutput(out), [
      {
        startMs: 170,
        endMs: 970,
        text: 'we will',
        words: [
          { startMs: 170, endMs: 430, text: 'we' },
          { startMs: 440, endMs: 970, text: 'will' },
        ],
      },
      { startMs: 2000, endMs: 2500, text: 'meet', words: [{ startMs: 2000, endMs: 2500, text: 'meet' }] },
    ]);
    const many = Array.from(
      { length: 45 },
      (_, i) => `w${i} ${(i * 0.3).toFixed(2)} ${(i * 0.3 + 0.2).toFixed(2)} 1`,
    );
    assert.deepEqual(
      parsePocketsphinxOutput(many.join('\n')).map((s) => s.text.split(' ').length),
      [20, 20, 5],
    );
  });

  void it('classifies unsupported languages, a missing binary and timeouts', async () => {
    const wav = encodeWav(sine(1), 16_000);
    const lang = await rejection(new PocketsphinxTranscriber().transcribe({ wav, language: 'de' }));
    assert.deepEqual([lang.kind, lang.code], [ErrorKind.permanent, 'asr.unsupported_language']);
    const missing = await rejection(
      new PocketsphinxTranscriber({ binary: '/nonexistent/ps' }).transcribe({ wav, language: null }),
    );
    assert.deepEqual([missing.kind, missing.code], [ErrorKind.permanent, 'asr.unavailable']);
    assert.match(missing.message, /install pocketsphinx/);
    const slow = await rejection(
      new PocketsphinxTranscriber({ timeoutMs: 1 }).transcribe({
        wav: encodeWav(sine(20), 16_000),
        language: 'en-US',
      }),
    );
    assert.deepEqual([slow.kind, slow.code], [ErrorKind.transient, 'asr.timeout']);
  });
});

const API_KEY = 'verbatim-test-key-0f9e8d7c';
type Handler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void;

void describe('OpenAI-compatible providers against a local server', () => {
  let server: Server;
  let baseUrl = '';
  let handler: Handler = (_req, _body, res) => res.end();
  type Seen = Record<'url' | 'auth' | 'contentType', string | undefined> & { body: Buffer };
  const seen: Seen[] = [];
  const messages: string[] = [];

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const { authorization: auth, 'content-type': contentType } = req.headers;
        seen.push({ url: req.url, auth, contentType, body });
        handler(req, body, res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  function reply(status: number, body: unknown, headers: Record<string, string> = {}): void {
    handler = (_req, _body, res) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
  }

  async function failure(promise: Promise<unknown>): Promise<AppError> {
    const err = await rejection(promise);
    messages.push(err.message, JSON.stringify(err.toRecord()));
    return err;
  }

  const whisper = (timeoutMs = 5000) =>
    new WhisperTranscriber({ baseUrl: `${baseUrl}/v1/`, apiKey: API_KEY, timeoutMs });
  const writer = (timeoutMs = 5000) =>
    new OpenAiMinutesWriter({ baseUrl, apiKey: API_KEY, model: 'test-model', timeoutMs });
  const transcribe = (t = whisper(), signal?: AbortSignal) =>
    t.transcribe({ wav: encodeWav(sine(0.2), 16_000), language: 'en-US', ...(signal ? { signal } : {}) });
  const writeMinutes = (w = writer()) =>
    w.write({
      title: 'Weekly sync',
      language: 'en',
      segments: [{ startMs: 61_000, endMs: 64_000, text: 'We agreed to ship on Friday.' }],
    });

  void it('Whisper: sends a multipart verbose_json request and maps segments to ms', async () => {
    reply(200, {
      text: 'hello there',
      duration: 3.2,
      segments: [
        { start: 0.5, end: 1.25, text: ' hello' },
        { start: 1.25, end: 3.2, text: ' there ' },
      ],
    });
    seen.length = 0;
    assert.deepEqual(await transcribe(), [
      { startMs: 500, endMs: 1250, text: 'hello' },
      { startMs: 1250, endMs: 3200, text: 'there' },
    ]);
    const request = seen[0]!;
    assert.equal(request.url, '/v1/audio/transcriptions');
    assert.equal(request.auth, `Bearer ${API_KEY}`);
    const form = await new Response(request.body, {
      headers: { 'content-type': request.contentType! },
    }).formData();
    const fields = ['model', 'response_format', 'language'].map((k) => form.get(k));
    assert.deepEqual(fields, ['whisper-1', 'verbose_json', 'en']);
    assert.equal((form.get('file') as File).name, 'window.wav');
  });

  void it('Whisper: without segments, one segment spans the duration; no key, no Authorization', async () => {
    reply(200, { text: ' all of it ', duration: 2.5 });
    seen.length = 0;
    const t = new WhisperTranscriber({ baseUrl });
    assert.deepEqual(await transcribe(t), [{ startMs: 0, endMs: 2500, text: 'all of it' }]);
    assert.equal(seen[0]!.auth, undefined);
  });

  void it('OpenAI minutes: sends JSON mode chat and parses a fenced answer', async () => {
    const content =
      '```json\n{"summary":"Shipping was discussed.","decisions":["Ship on Friday"],"action_items":[]}\n```';
    reply(200, { choices: [{ message: { role: 'assistant', content } }] });
    seen.length = 0;
    assert.deepEqual(await writeMinutes(), {
      writer: 'llm',
      model: 'test-model',
      summary: 'Shipping was discussed.',
      decisions: ['Ship on Friday'],
      actionItems: [],
      note: null,
    });
    const sent = JSON.parse(seen[0]!.body.toString('utf8')) as Record<string, unknown> & {
      messages: { content: string }[];
    };
    assert.equal(seen[0]!.url, '/v1/chat/completions');
    const { model, response_format, temperature } = sent;
    assert.deepEqual(
      { model, response_format, temperature },
      { model: 'test-model', response_format: { type: 'json_object' }, temperature: 0.2 },
    );
    assert.match(sent.messages[1]!.content, /Weekly sync[\s\S]*\[01:01\] We agreed to ship on Friday\./);
  });

  for (const [label, call, service] of [
    ['Whisper', () => transcribe(), 'asr'],
    ['OpenAI minutes', () => writeMinutes(), 'llm'],
  ] as const) {
    void it(`J6: ${label} 503 overloaded is transient`, async () => {
      reply(503, { error: { message: 'The server is overloaded' } });
      const err = await failure(call());
      assert.deepEqual([err.kind, err.code], [ErrorKind.transient, `${service}.overloaded`]);
      assert.match(err.message, /503.*overloaded/);
    });

    void it(`J6: ${label} 429 with Retry-After is transient and keeps the delay`, async () => {
      reply(
        429,
        { error: { message: 'Rate limit reached for requests', code: 'rate_limit_exceeded' } },
        { 'retry-after': '7' },
      );
      const err = await failure(call());
      assert.deepEqual([err.kind, err.code], [ErrorKind.transient, `${service}.rate_limited`]);
      assert.equal(err.retryAfterSeconds, 7);
    });

    void it(`J6/L9: ${label} 429 insufficient_quota is quota_exhausted, not a retry`, async () => {
      reply(429, { error: { code: 'insufficient_quota', message: 'You exceeded your current quota' } });
      const err = await failure(call());
      assert.deepEqual([err.kind, err.code], [ErrorKind.quotaExhausted, `${service}.quota_exhausted`]);
    });

    void it(`J6: ${label} 400 is permanent, and an echoed key is scrubbed`, async () => {
      reply(400, { error: { message: `Invalid request made with key ${API_KEY}` } });
      const err = await failure(call());
      assert.deepEqual([err.kind, err.code], [ErrorKind.permanent, `${service}.bad_request`]);
    });

    void it(`J6: ${label} 401 is permanent unauthorized`, async () => {
      reply(401, { error: { message: 'Incorrect API key provided' } });
      const err = await failure(call());
      assert.deepEqual([err.kind, err.code], [ErrorKind.permanent, `${service}.unauthorized`]);
    });

    void it(`J6: ${label} 200 with malformed JSON is transient bad_response`, async () => {
      reply(200, '{"text": "oops');
      const err = await failure(call());
      assert.deepEqual([err.kind, err.code], [ErrorKind.transient, `${service}.bad_response`]);
    });
  }

  void it('J6: OpenAI minutes with unparseable content is transient llm.bad_response', async () => {
    reply(200, { choices: [{ message: { content: 'Sure! Here are your minutes: the team met.' } }] });
    const err = await failure(writeMinutes());
    assert.deepEqual([err.kind, err.code], [ErrorKind.transient, 'llm.bad_response']);
  });

  void it('J6: a provider that never answers times out as transient', async () => {
    handler = () => undefined;
    const a = await failure(transcribe(whisper(300)));
    assert.deepEqual([a.kind, a.code], [ErrorKind.transient, 'asr.timeout']);
    const b = await failure(writeMinutes(writer(300)));
    assert.deepEqual([b.kind, b.code], [ErrorKind.transient, 'llm.timeout']);
  });

  void it('J6: the caller aborting is rethrown as-is, not classified', async () => {
    handler = () => undefined;
    const controller = new AbortController();
    const reason = new Error('job cancelled');
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(transcribe(whisper(), controller.signal), (err) => err === reason);
  });

  void it('J6: a closed port is transient unreachable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const url = `http://127.0.0.1:${port}`;
    const a = await failure(transcribe(new WhisperTranscriber({ baseUrl: url, apiKey: API_KEY })));
    assert.deepEqual([a.kind, a.code], [ErrorKind.transient, 'asr.unreachable']);
    const b = await failure(writeMinutes(new OpenAiMinutesWriter({ baseUrl: url, apiKey: API_KEY })));
    assert.deepEqual([b.kind, b.code], [ErrorKind.transient, 'llm.unreachable']);
  });

  void it('J6: the API key never appears in any error message', () => {
    assert.ok(messages.length >= 20);
    for (const m of messages) assert.ok(!m.includes(API_KEY), m);
  });
});

void describe('provider-http classification', () => {
  void it('J6/L9: quota and billing are checked before rate limits and auth', () => {
    const code = (status: number, body = '') => classifyHttpFailure('llm', status, body, null).code;
    const billing = '{"error":{"message":"billing hard limit reached"}}';
    assert.deepEqual(
      [402, 403, 403, 529, 502, 408].map((status, i) => code(status, i === 1 ? billing : 'forbidden')),
      ['quota_exhausted', 'quota_exhausted', 'unauthorized', 'overloaded', 'server_error', 'timeout'].map(
        (c) => `llm.${c}`,
      ),
    );
    assert.equal(classifyHttpFailure('asr', 404, 'x'.repeat(1000), null).message.length < 260, true);
  });

  void it('J6: Retry-After is read as seconds or as an HTTP date', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    assert.equal(parseRetryAfter('7', now), 7);
    assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now), 30);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter(null, now), undefined);
  });
});

void describe('ExtractiveMinutesWriter', () => {
  void it('writes minutes without a model, saying so, and picks action items', async () => {
    const minutes = await new ExtractiveMinutesWriter().write({
      title: 'Planning',
      language: 'en',
      segments: [
        'Welcome to the planning meeting about the marketing budget.',
        'The marketing budget for next quarter is too small. We agreed to increase the marketing budget.',
        'Alice will send the revised budget by Friday.',
        'Nice weather today.',
      ].map((text, i) => ({ startMs: i * 4000, endMs: i * 4000 + 4000, text })),
    });
    assert.deepEqual([minutes.writer, minutes.model, minutes.note], ['extractive', null, EXTRACTIVE_NOTE]);
    assert.deepEqual(minutes.decisions, ['We agreed to increase the marketing budget.']);
    assert.ok(minutes.actionItems.includes('Alice will send the revised budget by Friday.'));
    assert.match(minutes.summary, /marketing budget/);
  });

  void it('says so when nothing was transcribed', async () => {
    const minutes = await new ExtractiveMinutesWriter().write({ title: 't', language: null, segments: [] });
    assert.equal(minutes.summary, 'No speech was transcribed.');
    assert.deepEqual([minutes.decisions, minutes.actionItems], [[], []]);
  });
});
