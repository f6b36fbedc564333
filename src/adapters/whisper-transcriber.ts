import { AppError, ErrorKind } from '../domain/errors.ts';
import type { TranscribeRequest, Transcriber, TranscriptSegment } from '../ports.ts';
import { ProviderHolds, providerFetch, providerUrl, type RetryAfterHolds } from './provider-http.ts';

export interface WhisperTranscriberOptions {
  /** Server root, e.g. `https://api.openai.com` (a trailing `/v1` is tolerated). */
  baseUrl: string;
  apiKey?: string | null;
  /** Default `whisper-1`. */
  model?: string;
  /** Default 120 000. */
  timeoutMs?: number;
  /**
   * W3: `verbose_json` (default; a segment's `speaker`, as WhisperX-style servers add, is read) or
   * `diarized_json` (a diarizing model: `chunking_strategy=auto`, no prompt, and reference clips of
   * the speakers already heard as `known_speaker_names[]`/`known_speaker_references[]`).
   */
  format?: 'verbose_json' | 'diarized_json';
  /** V6: the Retry-After holds shared by every process (the app's); default, this adapter's own. */
  holds?: RetryAfterHolds;
}

interface VerboseJson {
  text?: unknown;
  duration?: unknown;
  segments?: unknown;
}

/** Speech recognition through an OpenAI-compatible `/v1/audio/transcriptions` endpoint. */
export class WhisperTranscriber implements Transcriber {
  readonly name = 'whisper';
  private readonly url: string;
  private readonly apiKey: string | null;
  private readonly model: string;
  private readonly timeoutMs: number;
  private readonly format: 'verbose_json' | 'diarized_json';
  /** W3: speakers of one request carry to the next only through reference clips (diarized_json). */
  readonly speakerIdentity: 'window' | 'references';
  /** W7: verbose_json servers take a prompt; a diarizing model refuses one. */
  readonly takesVocabulary: boolean;

  /** V6: the provider's Retry-After holds this adapter's requests to that endpoint. */
  private readonly holds: RetryAfterHolds;

  constructor(options: WhisperTranscriberOptions) {
    this.holds = options.holds ?? new ProviderHolds();
    this.url = providerUrl(options.baseUrl, '/v1/audio/transcriptions');
    this.apiKey = options.apiKey ?? null;
    this.model = options.model ?? 'whisper-1';
    this.timeoutMs = options.timeoutMs ?? 120_000;
    this.format = options.format ?? 'verbose_json';
    this.speakerIdentity = this.format === 'diarized_json' ? 'references' : 'window';
    this.takesVocabulary = this.format === 'verbose_json';
  }

  async transcribe(request: TranscribeRequest): Promise<TranscriptSegment[]> {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(request.wav)], { type: 'audio/wav' }), 'window.wav');
    form.append('model', this.model);
    form.append('response_format', this.format);
    const prompt = vocabularyPrompt(request.vocabulary ?? []);
    if (this.takesVocabulary && prompt) form.append('prompt', prompt);
    if (this.format === 'diarized_json') {
      // Such models cut long audio themselves and take no prompt; the speakers already heard in
      // this meeting are named by short clips of their voices (at most four, as the API allows).
      form.append('chunking_strategy', 'auto');
      for (const known of (request.knownSpeakers ?? []).slice(0, 4)) {
        form.append('known_speaker_names[]', known.name);
        form.append('known_speaker_references[]', `data:audio/wav;base64,${known.wav.toString('base64')}`);
      }
    }
    // The API takes ISO-639-1 codes: `en-US` becomes `en`.
    const language = request.language?.split(/[-_]/)[0]?.toLowerCase();
    if (language) form.append('language', language);

    const text = await providerFetch({
      holds: this.holds,
      service: 'asr',
      url: this.url,
      body: form,
      timeoutMs: this.timeoutMs,
      signal: request.signal,
      apiKey: this.apiKey,
    });
    return parseVerboseJson(text);
  }
}

/**
 * W7: the workspace's vocabulary as Whisper's prompt: a list of the spellings to prefer, within the
 * prompt's budget (Whisper reads about 224 tokens of it; 600 characters stay well inside).
 */
export function vocabularyPrompt(terms: string[]): string | null {
  const kept: string[] = [];
  let used = 'Glossary: .'.length;
  for (const term of terms) {
    const t = term.replace(/\s+/g, ' ').trim();
    if (t === '' || used + t.length + 2 > 600) continue;
    kept.push(t);
    used += t.length + 2;
  }
  return kept.length > 0 ? `Glossary: ${kept.join(', ')}.` : null;
}

function badResponse(reason: string): AppError {
  return new AppError(ErrorKind.transient, 'asr.bad_response', `speech-to-text provider ${reason}`);
}

function parseVerboseJson(text: string): TranscriptSegment[] {
  let body: VerboseJson;
  try {
    body = JSON.parse(text) as VerboseJson;
  } catch {
    throw badResponse('returned a response that is not JSON');
  }
  if (typeof body !== 'object' || body === null || typeof body.text !== 'string') {
    throw badResponse('returned JSON without a transcript text');
  }

  if (Array.isArray(body.segments) && body.segments.length > 0) {
    const segments: TranscriptSegment[] = [];
    for (const raw of body.segments as unknown[]) {
      const s = raw as { start?: unknown; end?: unknown; text?: unknown; speaker?: unknown } | null;
      if (!s || typeof s.start !== 'number' || typeof s.end !== 'number' || typeof s.text !== 'string') {
        throw badResponse('returned a malformed segment');
      }
      const segmentText = s.text.trim();
      if (segmentText === '') continue;
      const startMs = Math.max(0, Math.round(s.start * 1000));
      const segment: TranscriptSegment = {
        startMs,
        endMs: Math.max(startMs, Math.round(s.end * 1000)),
        text: segmentText,
      };
      // W3: the server's speaker (cluster) for this segment, where it diarizes.
      if ((typeof s.speaker === 'string' && s.speaker.trim() !== '') || typeof s.speaker === 'number')
        segment.cluster = String(s.speaker).trim().slice(0, 100);
      segments.push(segment);
    }
    return segments;
  }

  const whole = body.text.trim();
  if (whole === '') return [];
  const duration = typeof body.duration === 'number' && body.duration > 0 ? body.duration : 0;
  return [{ startMs: 0, endMs: Math.round(duration * 1000), text: whole }];
}
