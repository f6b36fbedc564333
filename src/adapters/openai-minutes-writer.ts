import { AppError, ErrorKind } from '../domain/errors.ts';
import { clock, type RenderedSegment } from '../domain/transcript-format.ts';
import type { Minutes, MinutesRequest, MinutesWriter } from '../ports.ts';
import { ProviderHolds, providerFetch, providerUrl, type RetryAfterHolds } from './provider-http.ts';

export interface OpenAiMinutesWriterOptions {
  /** Server root, e.g. `https://api.openai.com` (a trailing `/v1` is tolerated). */
  baseUrl: string;
  apiKey?: string | null;
  /** Default `gpt-4o-mini`. */
  model?: string;
  /** Default 120 000. */
  timeoutMs?: number;
  /** Transcript characters sent to the model; the rest is cut at a line boundary. Default 48 000. */
  maxTranscriptChars?: number;
  /** V6: the Retry-After holds shared by every process (the app's); default, this adapter's own. */
  holds?: RetryAfterHolds;
}

const SYSTEM_PROMPT = [
  'You write concise, factual meeting minutes from a transcript produced by speech recognition,',
  'which may contain recognition errors. Use only what the transcript says; do not invent names,',
  'dates or numbers. Write in the language of the transcript.',
  'Answer with a single JSON object and nothing else, exactly of the form',
  '{"summary": string, "decisions": string[], "action_items": string[]}.',
  '"summary" is a short paragraph; "decisions" lists what was decided or agreed;',
  '"action_items" lists tasks, with the owner and due date when stated. Use [] when there are none.',
  'Lines may start with the name of who spoke ("Ann: ..."): attribute each decision and task to the',
  'person who made or took it, as "Name: ...", when the transcript shows who; never guess a name.',
].join(' ');

/** Minutes from an OpenAI-compatible `/v1/chat/completions` endpoint in JSON mode. */
export class OpenAiMinutesWriter implements MinutesWriter {
  readonly name = 'openai-chat';
  private readonly url: string;
  private readonly apiKey: string | null;
  private readonly model: string;
  private readonly timeoutMs: number;
  private readonly maxTranscriptChars: number;

  /** V6: the provider's Retry-After holds this adapter's requests to that endpoint. */
  private readonly holds: RetryAfterHolds;

  constructor(options: OpenAiMinutesWriterOptions) {
    this.holds = options.holds ?? new ProviderHolds();
    this.url = providerUrl(options.baseUrl, '/v1/chat/completions');
    this.apiKey = options.apiKey ?? null;
    this.model = options.model ?? 'gpt-4o-mini';
    this.timeoutMs = options.timeoutMs ?? 120_000;
    this.maxTranscriptChars = options.maxTranscriptChars ?? 48_000;
  }

  async write(request: MinutesRequest): Promise<Minutes> {
    const transcript = renderTranscript(request.segments, this.maxTranscriptChars);
    if (transcript.text === '') {
      return this.minutes('No speech was transcribed.', [], []);
    }
    const user = [
      `Meeting title: ${request.title}`,
      request.language ? `Language hint: ${request.language}` : null,
      '',
      transcript.truncated ? 'Transcript (truncated):' : 'Transcript:',
      transcript.text,
    ]
      .filter((line) => line !== null)
      .join('\n');

    const body = await providerFetch({
      holds: this.holds,
      service: 'llm',
      url: this.url,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        model: this.model,
        messages: [
          { role: 'system', content: SYSTEM_PROMPT },
          { role: 'user', content: user },
        ],
        response_format: { type: 'json_object' },
        temperature: 0.2,
      }),
      timeoutMs: this.timeoutMs,
      signal: request.signal,
      apiKey: this.apiKey,
    });
    const parsed = parseMinutesContent(chatContent(body));
    return this.minutes(parsed.summary, parsed.decisions, parsed.actionItems);
  }

  private minutes(summary: string, decisions: string[], actionItems: string[]): Minutes {
    return { writer: 'llm', model: this.model, summary, decisions, actionItems, note: null };
  }
}

function badResponse(reason: string): AppError {
  return new AppError(ErrorKind.transient, 'llm.bad_response', `language model provider ${reason}`);
}

function renderTranscript(segments: RenderedSegment[], budget: number): { text: string; truncated: boolean } {
  const lines: string[] = [];
  let used = 0;
  for (const s of segments) {
    const text = s.text.replace(/\s+/g, ' ').trim();
    if (text === '') continue;
    // W6: the speaker's name where a source knows it, so the model can attribute what was said.
    const who = s.speaker ? `${s.speaker.name.replace(/\s+/g, ' ').trim()}: ` : '';
    const line = `[${clock(s.startMs)}] ${who}${text}`;
    if (used + line.length + 1 > budget) {
      if (lines.length === 0) lines.push(line.slice(0, budget));
      return { text: lines.join('\n'), truncated: true };
    }
    lines.push(line);
    used += line.length + 1;
  }
  return { text: lines.join('\n'), truncated: false };
}

/** The message content of an OpenAI-compatible chat completion; a malformed answer is transient. */
export function chatContent(body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw badResponse('returned a response that is not JSON');
  }
  const content = (parsed as { choices?: Array<{ message?: { content?: unknown } }> } | null)?.choices?.[0]
    ?.message?.content;
  if (typeof content !== 'string' || content.trim() === '') throw badResponse('returned no message content');
  return content;
}

/** Parses the model's JSON answer, tolerating a Markdown code fence around it. */
export function parseMinutesContent(content: string): {
  summary: string;
  decisions: string[];
  actionItems: string[];
} {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(content);
  const json = (fenced?.[1] ?? content).trim();
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw badResponse('answered with malformed JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badResponse('answered with JSON that is not an object');
  }
  const record = value as Record<string, unknown>;
  if (typeof record.summary !== 'string' || record.summary.trim() === '') {
    throw badResponse('answered without a summary');
  }
  return {
    summary: record.summary.trim(),
    decisions: stringList(record.decisions, 'decisions'),
    actionItems: stringList(record.action_items ?? record.actionItems, 'action_items'),
  };
}

function stringList(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw badResponse(`answered with "${field}" that is not a list`);
  return value.map((item) => listItemText(item).replace(/\s+/g, ' ').trim()).filter((item) => item !== '');
}

// Models sometimes answer `{"task": ..., "owner": ...}` instead of a string.
function listItemText(item: unknown): string {
  if (typeof item === 'string') return item;
  if (typeof item === 'number') return String(item);
  if (typeof item === 'object' && item !== null) {
    return Object.values(item)
      .filter((v): v is string => typeof v === 'string' && v.trim() !== '')
      .join(' — ');
  }
  return '';
}
