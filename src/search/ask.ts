import { readAsTenant } from '../db/tenant.ts';
import { ErrorKind, toErrorRecord } from '../domain/errors.ts';
import { withoutNearDuplicates } from '../domain/near-duplicate.ts';
import { citationsOf, questionQuery } from '../domain/search.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import type { AnswerPassage } from '../ports.ts';
import { transcriptLines } from '../meetings/transcript-read.ts';

/** Meetings searched for passages, and hits taken from each. */
const ASK_MEETINGS = 5;
const ASK_HITS_PER_MEETING = 2;
/** A hit is widened with the transcript this far either side of it. */
const CONTEXT_MS = 10_000;
export const QUESTION_MAX = 1000;

export interface AskPassage {
  n: number;
  meetingId: string;
  meetingTitle: string;
  meetingDate: Date;
  kind: 'segment' | 'minutes';
  startMs: number | null;
  endMs: number | null;
  text: string;
}

export interface AskAnswer {
  question: string;
  /** `model`: written by the chat model with citations; `passages`: the passages themselves. */
  mode: 'model' | 'passages';
  answer: string | null;
  /** Why the answer is the passages, in plain words (offline, outage, quota); null for a model answer. */
  note: string | null;
  model: string | null;
  /** The passages the answer cites, in order of first mention (model mode). */
  citations: AskPassage[];
  passages: AskPassage[];
}

/**
 * W6: a stretch of transcript as the answer writer reads it: each speaker's name where it changes
 * ("Ann Lee: … Bob: …"), so an answer can say who said what; lines of no known speaker as they are.
 */
export function saidBy(lines: Array<{ text: string; speaker: { name: string } | null }>): string {
  const out: string[] = [];
  let last: string | null = null;
  for (const l of lines) {
    const name = l.speaker?.name ?? null;
    out.push(name !== null && name !== last ? `${name}: ${l.text}` : l.text);
    last = name;
  }
  return out.join(' ');
}

/**
 * O5: retrieves the best passages for a question (search, each hit widened with the transcript
 * around it) and has the chat model answer from them, keeping only citations of passages it was
 * given. Without a model, or when the model is out or over its quota, the answer is the passages,
 * labelled so.
 */
export async function ask(
  deps: Pick<MeetingDeps, 'db' | 'search' | 'answerWriter' | 'log'>,
  workspaceId: string,
  question: string,
  signal?: AbortSignal,
): Promise<AskAnswer> {
  const passages = await readAsTenant(deps.db, workspaceId, async (trx) => {
    const page = await deps.search.search(
      trx,
      workspaceId,
      questionQuery(question),
      {},
      { offset: 0, limit: ASK_MEETINGS },
    );
    const out: Omit<AskPassage, 'n'>[] = [];
    for (const result of page.results) {
      for (const hit of result.hits.slice(0, ASK_HITS_PER_MEETING)) {
        const base = {
          meetingId: result.meeting.id,
          meetingTitle: result.meeting.title,
          meetingDate: result.meeting.createdAt,
          kind: hit.kind,
        };
        if (hit.kind === 'minutes' || hit.startMs === null || hit.endMs === null) {
          out.push({ ...base, startMs: null, endMs: null, text: hit.text });
          continue;
        }
        const around = await transcriptLines(trx, result.meeting.id, {
          fromMs: hit.startMs - CONTEXT_MS,
          toMs: hit.endMs + CONTEXT_MS,
        });
        out.push({
          ...base,
          startMs: around[0]?.startMs ?? hit.startMs,
          endMs: around.at(-1)?.endMs ?? hit.endMs,
          text: saidBy(around) || hit.text,
        });
      }
    }
    return out;
  });
  // Two hits of one meeting close together widen to the same stretch: it is given once.
  const numbered: AskPassage[] = withoutNearDuplicates(passages, (p) => p.text).map((p, i) => ({
    ...p,
    n: i + 1,
  }));
  const base = { question, passages: numbered, citations: [] as AskPassage[] };
  if (numbered.length === 0) {
    return {
      ...base,
      mode: 'passages',
      answer: null,
      model: deps.answerWriter?.model ?? null,
      note: 'Nothing in this workspace’s meetings matches the question.',
    };
  }
  if (!deps.answerWriter) {
    return {
      ...base,
      mode: 'passages',
      answer: null,
      model: null,
      note: 'No language model is configured, so there is no written answer: these are the passages of your meetings that best match the question.',
    };
  }
  const given: AnswerPassage[] = numbered.map((p) => ({
    n: p.n,
    meetingTitle: p.meetingTitle,
    meetingDate: p.meetingDate,
    startMs: p.startMs,
    text: p.text,
  }));
  try {
    const raw = await deps.answerWriter.answer({ question, passages: given, signal });
    const { text, cited } = citationsOf(raw, numbered.length);
    return {
      ...base,
      mode: 'model',
      answer: text,
      model: deps.answerWriter.model,
      note: null,
      citations: cited.map((n) => numbered[n - 1]!),
    };
  } catch (err) {
    if (signal?.aborted) throw err;
    const error = toErrorRecord(err, 'llm');
    if (error.kind === ErrorKind.quotaExhausted) {
      return {
        ...base,
        mode: 'passages',
        answer: null,
        model: deps.answerWriter.model,
        note: 'The language model’s quota is used up, so there is no written answer: these are the passages that best match the question. A written answer will work again once the quota is raised or renewed.',
      };
    }
    if (error.kind === ErrorKind.transient) {
      deps.log.warn(
        { code: error.code },
        'ask: the language model is unavailable; answering with the passages',
      );
      return {
        ...base,
        mode: 'passages',
        answer: null,
        model: deps.answerWriter.model,
        note: 'The language model is not answering right now, so there is no written answer: these are the passages that best match the question. Ask again in a few minutes for a written answer.',
      };
    }
    deps.log.warn(
      { code: error.code },
      'ask: the language model refused the question; answering with the passages',
    );
    return {
      ...base,
      mode: 'passages',
      answer: null,
      model: deps.answerWriter.model,
      note: `The language model refused the question (${error.code}), so there is no written answer: these are the passages that best match it. An operator should check the model's settings.`,
    };
  }
}
