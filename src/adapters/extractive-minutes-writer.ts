import { withoutNearDuplicates } from '../domain/near-duplicate.ts';
import type { RenderedSegment } from '../domain/transcript-format.ts';
import type { Minutes, MinutesRequest, MinutesWriter } from '../ports.ts';

export const EXTRACTIVE_NOTE =
  'Extractive minutes: sentences picked from the transcript without a language model.';

const SUMMARY_SENTENCES = 3;
const MAX_LIST_ITEMS = 10;

const STOPWORDS = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below ' +
    'between both but by can could did do does doing down during each few for from further had has have ' +
    'having he her here hers herself him himself his how i if in into is it its itself just let me more most ' +
    'my myself no nor not now of off on once only or other our ours ourselves out over own same she should ' +
    'so some such than that the their theirs them themselves then there these they this those through to ' +
    'too under until up very was we were what when where which while who whom why will with would you your ' +
    'yours yourself yourselves yeah yes okay ok oh um uh like really right well also get got going go know ' +
    "think thing things lot gonna wanna kind sort actually i'm it's that's we're you're don't we'll i'll can't"
  ).split(' '),
);

const DECISION = /\b(decided|agreed|decision|approved?|approves|approval|we will|we'll|going with)\b/i;
const ACTION =
  /\b(will|need to|needs to|should|action|todo|to-do|send|follow up|follow-up|by (monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b/i;

/** Offline minutes: the most representative sentences, plus sentences that read as decisions or tasks. */
export class ExtractiveMinutesWriter implements MinutesWriter {
  readonly name = 'extractive';

  write(request: MinutesRequest): Promise<Minutes> {
    return Promise.resolve(extractiveMinutes(request.segments));
  }
}

export function extractiveMinutes(segments: RenderedSegment[]): Minutes {
  const spoken = splitSentences(segments);
  const sentences = spoken.map((s) => s.text);
  // W6: a decision or a task is attributed to its speaker where a source knows who said it.
  const said = (i: number) => {
    const who = spoken[i]!.speaker;
    return who ? `${who}: ${finish(spoken[i]!.text)}` : finish(spoken[i]!.text);
  };
  if (sentences.length === 0) {
    return minutes('No speech was transcribed.', [], []);
  }

  const frequency = new Map<string, number>();
  for (const sentence of sentences) {
    for (const word of contentWords(sentence)) frequency.set(word, (frequency.get(word) ?? 0) + 1);
  }
  const scored = sentences.map((text, index) => {
    const words = contentWords(text);
    const total = words.reduce((sum, w) => sum + (frequency.get(w) ?? 0), 0);
    // sqrt damping: favours sentences dense in recurring topics without simply favouring the longest.
    return { text, index, score: words.length === 0 ? 0 : total / Math.sqrt(words.length) };
  });
  // The best sentences that do not repeat one another: a speaker who says one thing three times
  // gets it into the summary once.
  const summary = withoutNearDuplicates(
    [...scored].sort((a, b) => b.score - a.score || a.index - b.index),
    (s) => s.text,
  )
    .slice(0, SUMMARY_SENTENCES)
    .sort((a, b) => a.index - b.index)
    .map((s) => finish(s.text))
    .join(' ');

  const indexed = sentences.map((text, i) => ({ text, i }));
  const decisions = withoutNearDuplicates(
    indexed.filter((s) => DECISION.test(s.text)),
    (s) => s.text,
  ).map((s) => said(s.i));
  const actionItems = withoutNearDuplicates(
    indexed.filter((s) => ACTION.test(s.text)),
    (s) => s.text,
  ).map((s) => said(s.i));
  return minutes(summary, decisions.slice(0, MAX_LIST_ITEMS), actionItems.slice(0, MAX_LIST_ITEMS));
}

function minutes(summary: string, decisions: string[], actionItems: string[]): Minutes {
  return { writer: 'extractive', model: null, summary, decisions, actionItems, note: EXTRACTIVE_NOTE };
}

/** Punctuated text is split into sentences; unpunctuated ASR output keeps one unit per segment. */
function splitSentences(segments: RenderedSegment[]): Array<{ text: string; speaker: string | null }> {
  const out: Array<{ text: string; speaker: string | null }> = [];
  for (const segment of segments) {
    for (const part of segment.text.split(/(?<=[.!?])\s+/)) {
      const text = part.replace(/\s+/g, ' ').trim();
      if (/[\p{L}\p{N}]/u.test(text)) out.push({ text, speaker: segment.speaker?.name ?? null });
    }
  }
  return out;
}

function contentWords(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? []).filter(
    (w) => w.length > 1 && !STOPWORDS.has(w),
  );
}

function finish(sentence: string): string {
  const capitalised = sentence.charAt(0).toUpperCase() + sentence.slice(1);
  return /[.!?]$/.test(capitalised) ? capitalised : `${capitalised}.`;
}
