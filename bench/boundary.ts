/**
 * (e) Boundary loss: the word error rate of a multi-minute synthetic meeting transcribed
 * window by window, divided by the same recogniser's rate on the whole file — for fixed 60 s cuts
 * and for Verbatim's cuts at quiet points (L18). Real flite speech, real PocketSphinx.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PocketsphinxTranscriber } from '../src/adapters/pocketsphinx-transcriber.ts';
import { planWindows } from '../src/domain/audio-windows.ts';
import { encodeWav, parseWav } from '../src/domain/wav.ts';

const SENTENCES = [
  'the quarterly budget meeting will discuss the marketing plan',
  'we decided to hire two engineers for the platform team',
  'alice will send the report to the finance team by friday',
  'the customer asked for a faster release schedule next quarter',
  'please review the contract before the board meeting on monday',
  'our sales in europe grew by twelve percent this year',
  'the support queue is longer than it was last month',
  'bob will follow up with the legal department about the license',
];

export interface BoundaryLoss {
  seconds: number;
  whole: number;
  fixed: number;
  verbatim: number;
}

export async function boundaryLoss(minutes: number, windowSeconds = 60): Promise<BoundaryLoss> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-boundary-'));
  try {
    const words: string[] = [];
    const lines: string[] = [];
    for (let i = 0; words.length < minutes * 130; i++) {
      const s = SENTENCES[i % SENTENCES.length]!;
      lines.push(s);
      words.push(...s.split(' '));
    }
    const file = path.join(dir, 'meeting.wav');
    execFileSync('flite', [
      '-voice',
      'rms',
      '--setf',
      'duration_stretch=1.2',
      '-t',
      `${lines.join('. ')}.`,
      '-o',
      file,
    ]);
    const audio = parseWav(fs.readFileSync(file))!;
    const asr = new PocketsphinxTranscriber({ timeoutMs: 600_000 });
    const recognise = async (samples: Int16Array) =>
      (await asr.transcribe({ wav: encodeWav(samples, audio.sampleRate), language: 'en' }))
        .map((s) => s.text)
        .join(' ');
    const whole = await recognise(audio.samples);
    const slot = windowSeconds * audio.sampleRate;
    const fixedParts: string[] = [];
    for (let i = 0; i < audio.samples.length; i += slot) {
      fixedParts.push(await recognise(audio.samples.subarray(i, i + slot)));
    }
    const ours: string[] = [];
    for (const w of planWindows(audio.samples, audio.sampleRate, windowSeconds)) {
      ours.push(await recognise(audio.samples.subarray(w.startSample, w.endSample)));
    }
    return {
      seconds: audio.samples.length / audio.sampleRate,
      whole: wordErrorRate(words, whole),
      fixed: wordErrorRate(words, fixedParts.join(' ')),
      verbatim: wordErrorRate(words, ours.join(' ')),
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Word-level edit distance over the reference length. */
export function wordErrorRate(reference: string[], hypothesisText: string): number {
  const hyp = hypothesisText.toLowerCase().split(/\s+/).filter(Boolean);
  let prev = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= reference.length; i++) {
    const row = [i];
    for (let j = 1; j <= hyp.length; j++) {
      const cost = reference[i - 1] === hyp[j - 1] ? 0 : 1;
      row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost));
    }
    prev = row;
  }
  return prev[hyp.length]! / reference.length;
}
