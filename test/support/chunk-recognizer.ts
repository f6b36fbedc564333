import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodeWav, parseWav } from '../../src/domain/wav.ts';

/**
 * A speech recognizer at the HTTP boundary (OpenAI-compatible /v1/audio/transcriptions) that names
 * where its audio came from. Test chunks carry their sequence number in every sample (a square
 * wave of amplitude (seq + 1) × 64), so the recognizer can answer, for each run of samples from one
 * chunk, a segment `c<seq>x<samples>`. Summing those per chunk over a final transcript shows that
 * every sample of every chunk was transcribed, and none twice; their order shows the timeline.
 */

const STEP = 64;

/** A 16 kHz WAV chunk whose every sample says it belongs to chunk `seq`. */
export function markedChunk(seq: number, samples = 80_000): Buffer {
  const out = new Int16Array(samples);
  const level = (seq + 1) * STEP;
  for (let i = 0; i < samples; i++) out[i] = i % 2 === 0 ? level : -level;
  return encodeWav(out, 16_000);
}

/** The runs of one chunk's samples in a window's audio: [seq, first sample, count]. */
export function runsOf(samples: Int16Array): Array<[number, number, number]> {
  const runs: Array<[number, number, number]> = [];
  let i = 0;
  while (i < samples.length) {
    const level = Math.abs(samples[i]!);
    let j = i + 1;
    while (j < samples.length && Math.abs(samples[j]!) === level) j++;
    if (level !== 0) runs.push([level / STEP - 1, i, j - i]);
    i = j;
  }
  return runs;
}

export interface ChunkRecognizer {
  url: string;
  calls(): number;
  /**
   * Makes every request wait until `release()` (a recognizer slower than the test); with
   * `longerThan`, only requests of more samples than that (a window, not a chunk's draft).
   */
  hold(longerThan?: number): void;
  release(): void;
  close(): Promise<void>;
}

/**
 * With `sentence`, each run's mark is followed by that sentence (a recogniser that hears a lot):
 * a transcript long enough to scroll. `coverage` reads only transcripts without one.
 */
export async function startChunkRecognizer(options: { sentence?: string } = {}): Promise<ChunkRecognizer> {
  let calls = 0;
  let held: Array<() => void> | null = null;
  let heldLongerThan = 0;
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (c: Buffer) => body.push(c));
    req.on('end', () => {
      void (async () => {
        calls++;
        const form = await new Response(Buffer.concat(body), {
          headers: { 'content-type': String(req.headers['content-type']) },
        }).formData();
        const file = form.get('file');
        const wav = file instanceof Blob ? parseWav(Buffer.from(await file.arrayBuffer())) : null;
        if (held && (wav?.samples.length ?? Infinity) > heldLongerThan)
          await new Promise<void>((resolve) => held!.push(resolve));
        if (!wav) {
          res
            .writeHead(400, { 'content-type': 'application/json' })
            .end('{"error":{"message":"Invalid file format."}}');
          return;
        }
        const segments = runsOf(wav.samples).map(([seq, from, count], id) => ({
          id,
          start: from / 16_000,
          end: (from + count) / 16_000,
          text: ` c${seq}x${count}${options.sentence ? ` ${options.sentence}` : ''}`,
        }));
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            text: segments.map((s) => s.text).join(''),
            duration: wav.samples.length / 16_000,
            segments,
          }),
        );
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    hold: (longerThan = 0) => {
      held ??= [];
      heldLongerThan = longerThan;
    },
    release: () => {
      const waiting = held ?? [];
      held = null;
      for (const go of waiting) go();
    },
    close: async () => {
      const waiting = held ?? [];
      held = null;
      for (const go of waiting) go();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Reads a transcript of marked chunks: samples per chunk, and the chunk order along the timeline.
 * Throws if a segment is not one the recognizer writes.
 */
export function coverage(segments: Array<{ startMs: number; text: string }>): {
  samples: Map<number, number>;
  order: number[];
} {
  const samples = new Map<number, number>();
  const order: number[] = [];
  for (const s of [...segments].sort((a, b) => a.startMs - b.startMs)) {
    for (const word of s.text.split(/\s+/).filter(Boolean)) {
      const m = /^c(\d+)x(\d+)$/.exec(word);
      if (!m) throw new Error(`not a chunk mark: ${word}`);
      const seq = Number(m[1]);
      samples.set(seq, (samples.get(seq) ?? 0) + Number(m[2]));
      if (order.at(-1) !== seq) order.push(seq);
    }
  }
  return { samples, order };
}
