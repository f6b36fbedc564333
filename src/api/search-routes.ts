import type { FastifyInstance } from 'fastify';
import { readAsTenant } from '../db/tenant.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import {
  SEARCH_PAGE_DEFAULT,
  SEARCH_PAGE_MAX,
  SEARCH_QUERY_MAX,
  snippetHtml,
  type SearchFilters,
} from '../domain/search.ts';
import { MeetingSource, MeetingStatus } from '../domain/status.ts';
import { ask, QUESTION_MAX, type AskPassage } from '../search/ask.ts';
import { takeWorkspaceTokens } from '../workspaces/workspace-budget-store.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, json, jsonBody, refusal, type RouteSchema } from './contract.ts';
import { AskSchema, SearchSchema } from './schemas.ts';

const SEARCH_SCHEMA: RouteSchema = {
  summary:
    'O4: search what was said, across the workspace’s transcripts and minutes. `q` takes web search syntax: words (all must match), "quoted phrases", `or`, `-word`. English meetings are stemmed ("contracts" finds "contract"); meetings in other languages match word for word. Results are meetings, best first, each with its best hits: the segment’s start time (null for a line of the minutes), the plain `snippet`, the `highlights` as [start, end) offsets into it, and `snippetHtml` (escaped, matches in <mark>).',
  querystring: {
    type: 'object',
    required: ['q'],
    properties: {
      q: { type: 'string', minLength: 1, maxLength: SEARCH_QUERY_MAX },
      from: { type: 'string', format: 'date-time' },
      to: { type: 'string', format: 'date-time' },
      source: { enum: Object.values(MeetingSource) },
      status: { enum: Object.values(MeetingStatus) },
      speaker: {
        type: 'string',
        maxLength: 200,
        description: 'W6: only what this speaker said (their name as the transcript shows it, any case)',
      },
      limit: { type: 'integer', minimum: 1, maximum: SEARCH_PAGE_MAX, default: SEARCH_PAGE_DEFAULT },
      cursor: { type: 'string', description: 'nextCursor of the page before' },
    },
  },
  response: {
    200: json('{ query, results: [{ meeting, score, hitCount, hits }], nextCursor }', SearchSchema),
    ...ERRORS,
    400: refusal(
      'search.query, search.limit, search.cursor, search.from, search.to, search.source, search.status or search.speaker',
    ),
  },
};

const ASK_SCHEMA: RouteSchema = {
  summary:
    'O5: a question answered from the workspace’s meetings. The best passages (search hits widened with the transcript around them) are given to the chat model, whose answer cites them as [n]; `citations` are the passages it cited, never one it was not given. With no model configured, or the model out or over its quota, `mode` is `passages`: the answer is the passages themselves, and `note` says why in plain words.',
  body: jsonBody({
    type: 'object',
    required: ['question'],
    properties: { question: { type: 'string', minLength: 1, maxLength: QUESTION_MAX } },
  }),
  response: {
    200: json('{ question, mode: model|passages, answer, note, model, citations, passages }', AskSchema),
    ...ERRORS,
    400: refusal('ask.question'),
    429: refusal(
      'ask.rate_limited (the workspace’s asks a minute) or ask.busy (answers being written at once), with Retry-After',
    ),
  },
};

/** How long an asker told the server is busy writing answers waits before asking again. */
const ASK_BUSY_RETRY_SECONDS = 5;

interface SearchQuery {
  q?: string;
  from?: string;
  to?: string;
  source?: string;
  status?: string;
  speaker?: string;
  cursor?: string;
  limit?: string;
}

/** O4 and O5: GET /v1/search and POST /v1/ask, scoped to the key's workspace. */
export function registerSearchRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;
  /** F4: model calls for ask running in this process. */
  let askCalls = 0;

  app.get<{ Querystring: SearchQuery }>('/v1/search', { schema: SEARCH_SCHEMA }, async (req) => {
    const workspaceId = workspaceOf(req);
    const query = req.query;
    const q = (query.q ?? '').trim();
    if (q === '') throw invalid('search.query', 'q is required: the words to search for');
    if (q.length > SEARCH_QUERY_MAX) {
      throw invalid('search.query', `q must be at most ${SEARCH_QUERY_MAX} characters`);
    }
    const filters: SearchFilters = {
      from: dateParam(query.from, 'from'),
      to: dateParam(query.to, 'to'),
      source: oneOf(query.source, 'source', Object.values(MeetingSource)),
      status: oneOf(query.status, 'status', Object.values(MeetingStatus)),
      speaker: speakerParam(query.speaker),
    };
    const limit = query.limit === undefined ? SEARCH_PAGE_DEFAULT : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_PAGE_MAX) {
      throw invalid('search.limit', `limit must be a whole number from 1 to ${SEARCH_PAGE_MAX}`);
    }
    const offset = query.cursor === undefined ? 0 : decodeCursor(query.cursor);
    if (offset === null) throw invalid('search.cursor', 'cursor is not one this API returned');
    const page = await readAsTenant(deps.db, workspaceId, (trx) =>
      deps.search.search(trx, workspaceId, q, filters, { offset, limit }),
    );
    return {
      query: q,
      results: page.results.map((r) => ({
        meeting: r.meeting,
        score: r.score,
        hitCount: r.hitCount,
        hits: r.hits.map((h) => ({
          kind: h.kind,
          startMs: h.startMs,
          endMs: h.endMs,
          snippet: h.text,
          highlights: h.highlights,
          snippetHtml: snippetHtml(h),
          speaker: h.speaker ?? null,
        })),
      })),
      nextCursor: page.more ? encodeCursor(offset + limit) : null,
    };
  });

  app.post('/v1/ask', { schema: ASK_SCHEMA }, async (req, reply) => {
    const workspaceId = workspaceOf(req);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const question = typeof body.question === 'string' ? body.question.trim() : '';
    if (question === '') throw invalid('ask.question', 'question is required: a non-empty string');
    if (question.length > QUESTION_MAX) {
      throw invalid('ask.question', `question must be at most ${QUESTION_MAX} characters`);
    }
    // F4: a written answer costs a model call: within the workspace's budget (every key, every api
    // process) and this process's cap on calls at once; the call ends when the asker leaves.
    if (deps.answerWriter) {
      if (askCalls >= deps.config.ask.concurrency) {
        throw new AppError(
          ErrorKind.quotaExhausted,
          'ask.busy',
          `this server is writing ${deps.config.ask.concurrency} answers already (VERBATIM_ASK_CONCURRENCY); ask again in a few seconds`,
          { retryAfterSeconds: ASK_BUSY_RETRY_SECONDS },
        );
      }
      const perMinute = deps.config.ask.perMinute;
      // F4: the workspace's ask bucket, one of its F2 budgets (workspace_budgets, name 'ask').
      const taken =
        perMinute === 0 ? null : await takeWorkspaceTokens(deps.db, workspaceId, 'ask', perMinute, 60_000, 1);
      if (taken !== null && taken.granted === 0) {
        const wait = taken.retryAfterSeconds;
        throw new AppError(
          ErrorKind.quotaExhausted,
          'ask.rate_limited',
          `this workspace asked more than ${perMinute} questions in a minute (VERBATIM_ASK_PER_MINUTE); try again in ${wait} s`,
          { retryAfterSeconds: wait },
        );
      }
    }
    const left = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) left.abort();
    });
    askCalls++;
    let answer: Awaited<ReturnType<typeof ask>>;
    try {
      answer = await ask(deps, workspaceId, question, left.signal);
    } finally {
      askCalls--;
    }
    const view = (p: AskPassage) => ({
      n: p.n,
      meetingId: p.meetingId,
      meetingTitle: p.meetingTitle,
      meetingDate: p.meetingDate,
      kind: p.kind,
      startMs: p.startMs,
      endMs: p.endMs,
      text: p.text,
    });
    return {
      question: answer.question,
      mode: answer.mode,
      answer: answer.answer,
      note: answer.note,
      model: answer.model,
      citations: answer.citations.map(view),
      passages: answer.passages.map(view),
    };
  });
}

/** W6: a speaker's name to narrow a search to; blank is no filter. */
function speakerParam(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > 200)
    throw invalid('search.speaker', 'speaker must be a name of at most 200 characters');
  const name = value.replace(/\s+/g, ' ').trim();
  return name === '' ? undefined : name;
}

function invalid(code: string, message: string): AppError {
  return new AppError(ErrorKind.invalidInput, code, message);
}

function dateParam(value: string | undefined, name: string): Date | undefined {
  if (value === undefined || value === '') return undefined;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) {
    throw invalid(
      `search.${name}`,
      `${name} must be a date or time, like 2026-11-30 or 2026-11-30T09:00:00Z`,
    );
  }
  return date;
}

function oneOf(value: string | undefined, name: string, allowed: string[]): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (!allowed.includes(value))
    throw invalid(`search.${name}`, `${name} must be one of ${allowed.join(', ')}`);
  return value;
}

/** An opaque cursor: the offset of the next page. */
function encodeCursor(offset: number): string {
  return Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
}

function decodeCursor(cursor: string): number | null {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { o?: unknown };
    return typeof value.o === 'number' && Number.isInteger(value.o) && value.o >= 0 ? value.o : null;
  } catch {
    return null;
  }
}
