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

  /** V6: the provider's Retry-After holds this adapter's requests to that endpoint. */
  private readonly holds: RetryAfterHolds;

  constructor(options: WhisperTranscriberOptions) {
    this.holds = options.holds ?? new ProviderHolds();
    this.url = providerUrl(options.baseUrl, '/v1/audio/transcriptions');
    this.apiKey = options.apiKey ?? null;
    this.model = options.model ?? 'whisper-1';
    this.timeoutMs = options.timeoutMs ?? 120_000;
  }

  async transcribe(request: TranscribeRequest): Promise<TranscriptSegment[]> {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(request.wav)], { type: 'audio/wav' }), 'window.wav');
    form.append('model', this.model);
    form.append('response_format', 'verbose_json');
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
      const s = raw as { start?: unknown; end?: unknown; text?: unknown } | null;
      if (!s || typeof s.start !== 'number' || typeof s.end !== 'number' || typeof s.text !== 'string') {
        throw badResponse('returned a malformed segment');
      }
      const segmentText = s.text.trim();
      if (segmentText === '') continue;
      const startMs = Math.max(0, Math.round(s.start * 1000));
      segments.push({ startMs, endMs: Math.max(startMs, Math.round(s.end * 1000)), text: segmentText });
    }
    return segments;
  }

  const whole = body.text.trim();
  if (whole === '') return [];
  const duration = typeof body.duration === 'number' && body.duration > 0 ? body.duration : 0;
  return [{ startMs: 0, endMs: Math.round(duration * 1000), text: whole }];
}
