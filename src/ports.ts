import type { Readable } from 'node:stream';
import type { RenderedSegment } from './domain/transcript-format.ts';
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
  /** W2: the recogniser's word times, on the same clock as the segment's, where it gives them. */
  words?: Array<{ startMs: number; endMs: number; text: string }>;
  /** W3: a diarizing recogniser's speaker (cluster) label, as it gave it. */
  cluster?: string;
}

export interface TranscribeRequest {
  /** A 16 kHz mono 16-bit PCM WAV file. */
  wav: Buffer;
  /** BCP-47-ish language hint (`en`), or null to let the recogniser decide. */
  language: string | null;
  signal?: AbortSignal;
  /** W7: names and terms the audio may hold (a recogniser that takes a prompt is given them). */
  vocabulary?: string[];
  /** W3: the speakers this meeting has already heard, named, with a clip of each (≤ 10 s WAV). */
  knownSpeakers?: Array<{ name: string; wav: Buffer }>;
}

export interface Transcriber {
  readonly name: string;
  transcribe(request: TranscribeRequest): Promise<TranscriptSegment[]>;
  /**
   * W3: how far a diarizing recogniser's speakers carry: `window`, within one request only;
   * `references`, across requests through the known speakers' clips. Absent: it gives none.
   */
  readonly speakerIdentity?: 'window' | 'references';
  /** W7: whether it uses a vocabulary it is given (PocketSphinx does not). */
  readonly takesVocabulary?: boolean;
  /** Releases what it keeps between calls (a process started ahead of need), if anything. */
  close?(): Promise<void>;
}

export interface MinutesRequest {
  title: string;
  language: string | null;
  /** W6: with each segment's speaker, where a source knows it. */
  segments: RenderedSegment[];
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

/** O5: one passage given to the answer writer, numbered from 1 in the order given. */
export interface AnswerPassage {
  n: number;
  meetingTitle: string;
  meetingDate: Date;
  startMs: number | null;
  text: string;
}

/** O5: writes an answer to a question from the passages it is given, citing them as [n]. */
export interface AnswerWriter {
  readonly model: string;
  answer(request: { question: string; passages: AnswerPassage[]; signal?: AbortSignal }): Promise<string>;
}

export interface BlobStore {
  put(key: string, data: Buffer): Promise<void>;
  /**
   * B10: writes the object from a stream as it arrives, never holding it whole. The object exists
   * only once the stream has ended and every byte is written; a stream that fails (a client cut off
   * midway) or a failed write leaves no object, and the error is rethrown (the source's as is).
   */
  putStream(key: string, source: Readable): Promise<void>;
  get(key: string): Promise<Buffer>;
  /** Reads an object as a stream; a missing object rejects as `get` does. */
  getStream(key: string): Promise<Readable>;
  /** Idempotent: deleting a missing object succeeds. */
  delete(key: string): Promise<void>;
  /** B7: removes temporaries of interrupted writes older than `maxAgeMs`, where a store leaves any. */
  removeStaleTemporaries?(maxAgeMs?: number): Promise<{ removed: string[]; kept: number }>;
  /** S6, at start: a store with local state creates it (private to this OS user) or narrows it. */
  prepare?(): Promise<void>;
}

/** Raw 16 kHz mono signed 16-bit little-endian samples. */
export interface DecodedAudio {
  sampleRate: number;
  samples: Int16Array;
}

export interface AudioDecoder {
  /** Decodes any supported container/codec to 16 kHz mono PCM; `audio.undecodable` if it can't. */
  decode(data: Buffer, signal?: AbortSignal): Promise<DecodedAudio>;
  /**
   * J19: decodes the file at `path` as a stream of 16 kHz mono samples, in pieces, in constant
   * memory; stopping the iteration stops the decoder. Errors as `decode`.
   */
  decodeFile(path: string, signal?: AbortSignal, channels?: number): AsyncGenerator<Int16Array>;
  /** B11: how many channels the file's audio has (1 when it cannot tell). With `channels` > 1,
   * `decodeFile` yields that many channels interleaved. */
  channelsOf(path: string, signal?: AbortSignal): Promise<number>;
}

/** One step of a meeting bot's life as the provider reports it (Recall's `status_changes`). */
export interface BotStatusChange {
  /** `ready`, `joining_call`, `in_waiting_room`, `in_call_recording`, `call_ended`, `done`, `fatal`, … */
  code: string;
  /** Why, for `fatal` and `call_ended` (`bot_kicked_from_call`, …); an open set, not an enum. */
  subCode: string | null;
  message: string | null;
  at: Date;
}

/** A meeting bot at the provider. */
export interface Bot {
  id: string;
  /**
   * The URL the bot was created with, when the provider echoes it as text. Recall answers with a
   * parsed `{platform, meeting_id}` object and clears it days after the call, so this is null for
   * retrieved and listed bots: match bots to recordings by `metadata`, never by URL.
   */
  meetingUrl: string | null;
  /** Readable only while the bot is scheduled and has not joined (null afterwards). */
  joinAt: Date | null;
  metadata: Record<string, string>;
  /** The latest status change's code; a bot that reports none yet is `ready` (scheduled). */
  status: string;
  /** Oldest first, as the provider lists them. */
  statusChanges: BotStatusChange[];
  /**
   * The provider holds a recording for this bot: the bot was let in and recorded something. Its
   * media link (below) may still be missing while the provider processes it.
   */
  recorded: boolean;
  /** Where the recording's audio (or, failing that, its video) can be fetched; null until there is one. */
  recordingUrl: string | null;
  /**
   * R11: where the recording's participants and speaker timeline can be fetched: null while the
   * provider has not made them (or never will, for a recording without participant events).
   */
  speakerLinks: { participants: string; timeline: string } | null;
  /** R11: the provider is still making the participant events (a link may come later). */
  speakersPending: boolean;
}

/** R11: one participant as the provider names them (a re-join may be a new object). */
export interface BotParticipant {
  id: string;
  name: string | null;
  email: string | null;
}

/** R11: who the bot's recording heard, and when each spoke (seconds from the recording's start). */
export interface BotSpeakers {
  participants: BotParticipant[];
  timeline: Array<{ participant: BotParticipant; startS: number; endS: number | null }>;
}

export interface CreateBotRequest {
  meetingUrl: string;
  joinAt: Date;
  botName?: string;
  /** String values only (at most 500 characters each at Recall); listable with `metadata__<key>`. */
  metadata: Record<string, string>;
  /**
   * Sent as `Idempotency-Key`. The same key within the provider's retention (one hour at Recall)
   * returns the first bot instead of creating a second one; while the first request is still in
   * flight the provider answers 409 (`bot.idempotency_in_flight`, transient).
   */
  idempotencyKey: string;
}

export interface ListBotsQuery {
  /** Every pair must match (`metadata__<key>=<value>`). */
  metadata?: Record<string, string>;
  /** Latest status is any of these. */
  statuses?: string[];
  joinAtAfter?: Date;
  joinAtBefore?: Date;
  /** `next` from a previous page; when given, the other filters are already part of it. */
  cursor?: string;
  pageSize?: number;
}

export interface BotPage {
  bots: Bot[];
  /** Opaque cursor for the next page, or null on the last one. */
  next: string | null;
}

/**
 * A meeting-bot provider with Recall.ai's API shape (R1–R8). Every method makes exactly
 * one provider call (`downloadRecording` one download), so callers can account each call against
 * the provider's per-endpoint rate budgets (R2). Failures are `AppError`s: `bot.rate_limited`
 * (429) and `bot.no_capacity` (507) carry `retryAfterSeconds`.
 */
export interface BotProvider {
  readonly name: string;
  createBot(request: CreateBotRequest): Promise<Bot>;
  /** `bot.not_found` (permanent) for an unknown id. */
  retrieveBot(id: string): Promise<Bot>;
  listBots(query?: ListBotsQuery): Promise<BotPage>;
  /**
   * Deletes a scheduled bot that has not joined yet. Idempotent: a bot the provider no longer
   * knows (already deleted) counts as deleted. A bot already dispatched to its call cannot be
   * deleted: `bot.already_dispatched` (permanent).
   */
  deleteBot(id: string): Promise<void>;
  /**
   * Takes a bot that has joined out of its call. What it recorded so far is kept and processed (a
   * `done` follows). A bot that is not in a call (never joined, or already left) counts as success.
   */
  leaveCall(id: string): Promise<void>;
  /**
   * The recording from `bot.recordingUrl` (a pre-signed link, fetched without the API key) as it
   * downloads, or null when the bot has no recording or the recording is empty. B10: the bytes are
   * never held whole; a failure midway fails the stream with an `AppError`.
   */
  downloadRecording(bot: Bot): Promise<RecordingDownload | null>;
  /**
   * R11: the participants and the speaker timeline from `bot.speakerLinks` (two downloads of
   * pre-signed links, without the API key), or null when the bot has none.
   */
  downloadSpeakers(bot: Bot): Promise<BotSpeakers | null>;
}

/** A recording being downloaded: its bytes as they arrive, and the length announced, if any. */
export interface RecordingDownload {
  stream: Readable;
  declaredBytes: number | null;
}
