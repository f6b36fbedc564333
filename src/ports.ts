/**
 * The small interfaces the use cases depend on. Adapters are named technology + interface
 * (`PocketsphinxTranscriber`, `LocalBlobStore`); the composition root picks them from settings.
 *
 * Every adapter throws `AppError` (src/domain/errors.ts) classified where the failure is caught:
 * transient (retry with backoff), quota_exhausted (its own path), permanent (fail, don't retry).
 */

/** One stretch of recognised speech; times are relative to the start of the audio given. */
export interface TranscriptSegment {
  startMs: number;
  endMs: number;
  text: string;
}

export interface TranscribeRequest {
  /** A 16 kHz mono 16-bit PCM WAV file. */
  wav: Buffer;
  /** BCP-47-ish language hint (`en`), or null to let the recogniser decide. */
  language: string | null;
  signal?: AbortSignal;
}

export interface Transcriber {
  readonly name: string;
  transcribe(request: TranscribeRequest): Promise<TranscriptSegment[]>;
}

export interface MinutesRequest {
  title: string;
  language: string | null;
  segments: TranscriptSegment[];
  signal?: AbortSignal;
}

export interface Minutes {
  /** `llm` for a language model, `extractive` for the offline writer, which says so in `note`. */
  writer: 'llm' | 'extractive';
  model: string | null;
  summary: string;
  decisions: string[];
  actionItems: string[];
  note: string | null;
}

export interface MinutesWriter {
  readonly name: string;
  write(request: MinutesRequest): Promise<Minutes>;
}

export interface BlobStore {
  put(key: string, data: Buffer): Promise<void>;
  get(key: string): Promise<Buffer>;
  /** Idempotent: deleting a missing object succeeds. */
  delete(key: string): Promise<void>;
  /** B7: removes temporaries of interrupted writes older than `maxAgeMs`, where a store leaves any. */
  removeStaleTemporaries?(maxAgeMs?: number): Promise<{ removed: string[]; kept: number }>;
}

/** Raw 16 kHz mono signed 16-bit little-endian samples. */
export interface DecodedAudio {
  sampleRate: number;
  samples: Int16Array;
}

export interface AudioDecoder {
  /** Decodes any supported container/codec to 16 kHz mono PCM; `audio.undecodable` if it can't. */
  decode(data: Buffer, signal?: AbortSignal): Promise<DecodedAudio>;
}
