import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodeWav, parseWav } from '../../src/domain/wav.ts';

/**
 * W3: a diarizing recogniser at the HTTP boundary (OpenAI-compatible /v1/audio/transcriptions).
 * Test audio says who speaks in every sample: a speaker is a square wave of its own level. Each run
 * of one level is a segment `s<level>x<samples>` with a `speaker`:
 * - `verbose_json` (WhisperX-style servers): labels `SPEAKER_00`, `SPEAKER_01`… in the order the
 *   speakers first speak in this request, so labels of two requests need not be one person;
 * - `diarized_json` (a diarizing model): a speaker whose level matches a reference clip it was
 *   given (`known_speaker_references[]`) is named by that clip's `known_speaker_names[]`; others
 *   are `A`, `B`… in order. Such models refuse a `prompt`, as the real one does.
 */
export interface DiarizingRecognizer {
  url: string;
  requests: Array<{ format: string; knownNames: string[]; prompt: string | null }>;
  close(): Promise<void>;
}

/** `ms` of speaker `level`'s voice (a square wave), for a conversation's timeline. */
export function voice(level: number, ms: number): Int16Array {
  const n = Math.round((ms / 1000) * 16_000);
  return Int16Array.from({ length: n }, (_, i) => (i % 2 === 0 ? level : -level));
}

/** Voices and silences one after another, as a 16 kHz WAV. */
export function conversation(parts: Int16Array[]): Buffer {
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Int16Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return encodeWav(out, 16_000);
}

function runs(samples: Int16Array): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = [];
  let i = 0;
  while (i < samples.length) {
    const level = Math.abs(samples[i]!);
    let j = i + 1;
    while (j < samples.length && Math.abs(samples[j]!) === level) j++;
    if (level !== 0) out.push([level, i, j - i]);
    i = j;
  }
  return out;
}

export async function startDiarizingRecognizer(): Promise<DiarizingRecognizer> {
  const requests: DiarizingRecognizer['requests'] = [];
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (c: Buffer) => body.push(c));
    req.on('end', () => {
      void (async (): Promise<void> => {
        const form = await new Response(Buffer.concat(body), {
          headers: { 'content-type': String(req.headers['content-type']) },
        }).formData();
        const given = form.get('response_format');
        const format = typeof given === 'string' ? given : 'json';
        const prompt = form.get('prompt');
        const knownNames = form.getAll('known_speaker_names[]').filter((v) => typeof v === 'string');
        const references = form.getAll('known_speaker_references[]').filter((v) => typeof v === 'string');
        requests.push({ format, knownNames, prompt: typeof prompt === 'string' ? prompt : null });
        const fail = (status: number, message: string): void => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message } }));
        };
        if (format === 'diarized_json' && prompt !== null)
          return fail(400, 'Prompt is not supported for diarization.');
        const file = form.get('file');
        const wav = file instanceof Blob ? parseWav(Buffer.from(await file.arrayBuffer())) : null;
        if (!wav) return fail(400, 'Invalid file format.');
        const known = new Map<number, string>();
        references.forEach((ref, i) => {
          const clip = parseWav(Buffer.from(ref.replace(/^data:audio\/wav;base64,/, ''), 'base64'));
          const level = clip ? runs(clip.samples)[0]?.[0] : undefined;
          if (level !== undefined && knownNames[i]) known.set(level, knownNames[i]);
        });
        const fresh = new Map<number, string>();
        const labelOf = (level: number) => {
          const named = format === 'diarized_json' ? known.get(level) : undefined;
          if (named) return named;
          if (!fresh.has(level))
            fresh.set(
              level,
              format === 'diarized_json'
                ? String.fromCharCode(65 + fresh.size)
                : `SPEAKER_${String(fresh.size).padStart(2, '0')}`,
            );
          return fresh.get(level)!;
        };
        const segments = runs(wav.samples).map(([level, from, count], id) => ({
          ...(format === 'diarized_json' ? { type: 'transcript.text.segment' } : {}),
          id,
          start: from / 16_000,
          end: (from + count) / 16_000,
          text: ` s${level}x${count}`,
          speaker: labelOf(level),
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
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
