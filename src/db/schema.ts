import type {
  AttemptOutcome,
  ATTEMPT_RUNNING,
  BotRecordingStatus,
  JobStatus,
  MeetingStatus,
  WindowStatus,
} from '../domain/status.ts';
import type { ColumnType, Generated, Insertable, Kysely, Selectable, Transaction } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T = unknown> = ColumnType<T, string, string>;
type NullableJson<T = unknown> = ColumnType<T | null, string | null | undefined, string | null>;

export interface WorkspacesTable {
  id: string;
  name: string;
  created_at: Timestamp;
  bot_recording_enabled: ColumnType<boolean, boolean | undefined, boolean>;
  /** W7: names and product terms given to recognisers that take a prompt. */
  vocabulary: ColumnType<string[], string[] | undefined, string[]>;
  /** E4: days a meeting's audio is kept for playback after it is transcribed (0: deleted at completion). */
  playback_days: ColumnType<number, number | undefined, number>;
  /** F5: the workspace's share of each queue beside the others' (1: an equal share). */
  fair_weight: ColumnType<number, number | undefined, number>;
  /** F7: audio hours it may have transcribed each month (UTC); null: no cap. */
  monthly_hours_cap: ColumnType<number | null, number | null | undefined, number | null>;
  /** F5: at most this many of its batch jobs run at once; null: no cap. */
  max_running_jobs: ColumnType<number | null, number | null | undefined, number | null>;
}

/** F1: the bytes of windows a meeting's split has yet to store, reserved against the quotas while it is processed. */
export interface QuotaReservationsTable {
  meeting_id: string;
  workspace_id: string;
  bytes: ColumnType<number, number, number>;
}

/** F7: event streams open per workspace on each api process (migration 0060). */
export interface StreamCountsTable {
  workspace_id: string;
  process_id: string;
  open: number;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface ApiKeysTable {
  id: string;
  workspace_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  created_at: Timestamp;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
  expires_at: NullableTimestamp;
  /** U6: the person the key acts for; null for a service account (named by `name`). */
  user_id: ColumnType<string | null, string | null | undefined, string | null>;
  scopes: ColumnType<string[], string[] | undefined, string[]>;
}

/** U1/U2: a person. `email` is stored lowercased. */
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  password_hash: string | null;
  created_at: Timestamp;
  disabled_at: NullableTimestamp;
}

export interface MembershipsTable {
  workspace_id: string;
  user_id: string;
  role: string;
  created_at: Timestamp;
}

/** U3: a signed-in browser; only a hash of its secret is stored. */
export interface SessionsTable {
  id: string;
  id_hash: string;
  user_id: string;
  workspace_id: string;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  expires_at: Date;
  revoked_at: NullableTimestamp;
  address: string | null;
}

export interface SignInThrottleTable {
  key: string;
  failures: Generated<number>;
  locked_until: NullableTimestamp;
  updated_at: Timestamp;
}

/** U2: the one-time setup link of the first owner, and invite links. */
export interface AccessLinksTable {
  id: string;
  token_hash: string;
  kind: string;
  workspace_id: string;
  role: string;
  created_by: string | null;
  created_at: Timestamp;
  expires_at: Date;
  used_at: NullableTimestamp;
  used_by: string | null;
}

/** U2: a person's identity at a single sign-on provider. */
export interface UserIdentitiesTable {
  issuer: string;
  subject: string;
  user_id: string;
  email: string | null;
  created_at: Timestamp;
  last_used_at: Timestamp;
}

/** U2: a single sign-on in flight, keyed by the hash of its state. */
export interface SsoFlowsTable {
  state_hash: string;
  code_verifier: string;
  nonce: string;
  return_to: string;
  created_at: Timestamp;
  expires_at: Date;
}

/** U8: one thing done that an admin must be able to answer for. */
export interface AuditTrailTable {
  id: Generated<string>;
  workspace_id: string | null;
  at: Generated<Date>;
  action: string;
  actor_kind: string;
  actor_user_id: string | null;
  actor_key_id: string | null;
  actor_label: string | null;
  subject_type: string | null;
  subject_id: string | null;
  address: string | null;
  detail: ColumnType<unknown, string | undefined, string>;
}

/** U7: the check of the key the database's secrets are sealed with (one row). */
export interface SecretKeyChecksTable {
  id: Generated<boolean>;
  key_check: string;
  created_at: Generated<Date>;
}

/** E3: a person's correction of a stretch of a transcript. */
export interface TranscriptCorrectionsTable {
  id: string;
  workspace_id: string;
  meeting_id: string;
  start_ms: number;
  end_ms: number;
  original_text: string;
  text: string;
  author: string;
  created_at: Generated<Date>;
}

/** F4: a workspace's budget of ask calls (a token bucket). */
/** F5: each queue's base round per class; graphile-worker's priority is a job's round less it. */
export interface FairClocksTable {
  queue: string;
  fair_class: number;
  base: number;
  rebased_at: Date | null;
}

/** F2: a workspace's request budgets (token buckets), shared by its keys and api processes. */
export interface WorkspaceBudgetsTable {
  workspace_id: string;
  name: string;
  tokens: number;
  at: Generated<Date>;
}

/**
 * F4's first ask bucket (migration 0052). No longer written: the ask budget is the `ask` row of
 * `workspace_budgets` (F2). Kept while a release that still writes it may run beside this one
 * (expand, then contract); a later migration drops it.
 */
export interface AskBudgetTable {
  workspace_id: string;
  tokens: number;
  at: Generated<Date>;
}

/** U5: a read-only link to one meeting. */
export interface ShareLinksTable {
  id: string;
  token_hash: string;
  workspace_id: string;
  meeting_id: string;
  created_by: string | null;
  created_at: Timestamp;
  expires_at: Date;
  revoked_at: NullableTimestamp;
  opens: Generated<number>;
  last_opened_at: NullableTimestamp;
}

/** U4: the members a `shared` meeting is shown to. */
export interface MeetingSharesTable {
  meeting_id: string;
  user_id: string;
  workspace_id: string;
  created_at: Timestamp;
}

export interface MeetingsTable {
  id: string;
  workspace_id: string;
  source: string;
  title: string;
  language: string | null;
  status: MeetingStatus;
  window_ms: number;
  duration_ms: number | null;
  revision: Generated<number>;
  failure_code: string | null;
  failure_message: string | null;
  minutes_status: Generated<string>;
  minutes_code: string | null;
  minutes_message: string | null;
  minutes: NullableJson;
  transcript_completed_at: NullableTimestamp;
  /** J19: when the split cut an upload's last window (null until then, and for live meetings). */
  windows_cut_at: NullableTimestamp;
  closeout_wait_started_at: NullableTimestamp;
  untranscribed_in_flight: number | null;
  untranscribed_exhausted: number | null;
  audio_deleted_at: NullableTimestamp;
  /** E4: its audio is kept for playback until then (the workspace's playback_days after completion). */
  playback_until: NullableTimestamp;
  created_at: Timestamp;
  recording_at: NullableTimestamp;
  processing_at: NullableTimestamp;
  finalizing_at: NullableTimestamp;
  completed_at: NullableTimestamp;
  failed_at: NullableTimestamp;
  minutes_written_at: NullableTimestamp;
  updated_at: Timestamp;
  cut_samples: ColumnType<number, number | undefined, number>;
  next_seq: ColumnType<number, number | undefined, number>;
  missing_count: ColumnType<number, number | undefined, number>;
  placed_samples: ColumnType<number, number | undefined, number>;
  frontier_blocked_at: NullableTimestamp;
  declared_chunks: number | null;
  timeline_closed_at: NullableTimestamp;
  transcript_revision: ColumnType<number, number | undefined, number>;
  minutes_revision: number | null;
  last_repair_at: NullableTimestamp;
  /** B11: 'speakers' when each channel of the upload is a speaker; null for one mixed channel. */
  channels: ColumnType<'speakers' | null, 'speakers' | null | undefined, 'speakers' | null>;
  /** L25: a track's meeting is under its parent (the meeting people see); null for a meeting. */
  parent_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** L25: the track's name ('tab', …); the parent's own timeline is the track 'mic'. */
  track: ColumnType<string | null, string | null | undefined, string | null>;
  /** L25: where the track's sample 0 falls on the parent's timeline. */
  track_offset_ms: ColumnType<number | null, number | null | undefined, number | null>;
  /** U4: the person who made it (null: a service account's); and who may read it. */
  owner_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  visibility: ColumnType<string, string | undefined, string>;
  repair_failure_code: string | null;
  repair_failure_message: string | null;
  chunk_format: 'wav' | 'webm' | null;
  batch_id: string | null;
  stream_header: Buffer | null;
  /** L22: drafts skipped because the drafts queue had fallen behind real time. */
  drafts_shed: ColumnType<number, number | undefined, number>;
}

export interface ChunksTable {
  id: string;
  workspace_id: string;
  meeting_id: string;
  seq: number;
  blob_id: string;
  sha256: string;
  samples: number | null;
  format: ColumnType<'wav' | 'webm', 'wav' | 'webm' | undefined, 'wav' | 'webm'>;
  pcm_blob_id: string | null;
  stream_state: NullableJson;
  created_at: Timestamp;
  start_samples: number | null;
  energy: Buffer | null;
  decoded_after_gap: ColumnType<boolean, boolean | undefined, boolean>;
  undecodable: ColumnType<boolean, boolean | undefined, boolean>;
}

export interface TimelineGapsTable {
  id: string;
  workspace_id: string;
  meeting_id: string;
  first_seq: number;
  end_seq: number;
  start_samples: number;
  samples: number;
  arrived_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface WindowTalliesTable {
  meeting_id: string;
  total: number;
  pending: number;
  transcribed: number;
  failed: number;
  missing: number;
}

export interface ObjectCleanupsTable {
  id: string;
  workspace_id: string;
  meeting_id: string | null;
  object_key: string;
  bytes: ColumnType<number, number, number>;
  state: 'staged' | 'pending';
  reason: string;
  reserve_until: NullableTimestamp;
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: ColumnType<Date, Date | string | undefined, Date | string>;
  lease_owner: string | null;
  lease_expires_at: NullableTimestamp;
  delete_fenced_at: NullableTimestamp;
  last_error: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface BatchesTable {
  id: string;
  workspace_id: string;
  /** U4: who made it; they or an admin may cancel it. */
  owner_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  title: string;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  canceled_at: NullableTimestamp;
}

export interface WebhookEndpointsTable {
  id: string;
  workspace_id: string;
  url: string;
  /** U7: sealed (src/secrets/secret-box.ts), or plain from before sealing until the next start. */
  secret: string;
  previous_secret: string | null;
  previous_secret_until: NullableTimestamp;
  events: ColumnType<string[], string[] | undefined, string[]>;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  disabled_at: NullableTimestamp;
  /** F6: the first failed attempt since its last success; null while it succeeds. */
  failing_since: NullableTimestamp;
  /** F6: why the system disabled it; null when a person did (or it is enabled). */
  disabled_reason: string | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  workspace_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  body: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: ColumnType<number, number | undefined, number>;
  next_attempt_at: ColumnType<Date, Date | string | undefined, Date | string>;
  lease_owner: string | null;
  lease_expires_at: NullableTimestamp;
  last_error: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  delivered_at: NullableTimestamp;
  failed_at: NullableTimestamp;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

export interface ProviderBudgetsTable {
  endpoint: string;
  per_minute: number;
  blocked_until: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface ProviderHoldsTable {
  endpoint: string;
  held_until: ColumnType<Date, Date | string, Date | string>;
}

export interface ProviderCallsTable {
  id: Generated<number>;
  endpoint: string;
  at: ColumnType<Date, Date | string | undefined, never>;
}

export interface BotRecordingsTable {
  id: string;
  workspace_id: string;
  /** U4: who asked for it (the event's poster, the feed's subscriber); its meeting's owner. */
  owner_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  meeting_url: string;
  join_at: ColumnType<Date, Date | string, Date | string>;
  ends_at: ColumnType<Date, Date | string, Date | string>;
  title: ColumnType<string, string | undefined, string>;
  status: BotRecordingStatus;
  bot_id: string | null;
  schedule_attempted_at: NullableTimestamp;
  idempotency_key: string | null;
  schedule_inputs_hash: string | null;
  failure_code: string | null;
  failure_message: string | null;
  meeting_id: string | null;
  requested_by_api: ColumnType<boolean, boolean | undefined, boolean>;
  last_error: string | null;
  last_error_at: NullableTimestamp;
  /** When the recording entered each status it went through (ISO times by status). */
  state_times: ColumnType<Record<string, string>, string | undefined, string>;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface ProviderWebhookEventsTable {
  id: string;
  event: string;
  bot_id: string | null;
  outcome: string;
  received_at: ColumnType<Date, Date | string | undefined, never>;
  code: string | null;
  sub_code: string | null;
  recording_id: string | null;
  workspace_id: string | null;
}

export interface ApiCalendarEventsTable {
  workspace_id: string;
  event_id: string;
  recording_id: string;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface BotBackstopsTable {
  workspace_id: string;
  next_run_at: ColumnType<Date, Date | string, Date | string>;
  lease_owner: string | null;
  lease_expires_at: NullableTimestamp;
  last_run_at: NullableTimestamp;
}

export interface CalendarFeedsTable {
  id: string;
  workspace_id: string;
  /** U4: who subscribed the feed; the owner of the meetings its bots record. */
  owner_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  url: string;
  next_poll_at: ColumnType<Date, Date | string | undefined, Date | string>;
  lease_expires_at: NullableTimestamp;
  last_polled_at: NullableTimestamp;
  last_error: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

export interface CalendarEventsTable {
  feed_id: string;
  uid: string;
  recording_id: string | null;
  start_at: ColumnType<Date, Date | string, Date | string>;
  end_at: ColumnType<Date, Date | string, Date | string>;
  meeting_url: string | null;
  seen_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface StorageGuardsTable {
  scope: string;
}

export interface BlobsTable {
  id: string;
  workspace_id: string;
  meeting_id: string;
  kind: string;
  object_key: string;
  sha256: string;
  size_bytes: ColumnType<number, number, number>;
  content_type: string | null;
  created_at: Timestamp;
  deleted_at: NullableTimestamp;
  delete_fenced_at: NullableTimestamp;
}

export interface WindowsTable {
  id: string;
  workspace_id: string;
  meeting_id: string;
  index: number;
  start_ms: number;
  end_ms: number;
  blob_id: string | null;
  status: WindowStatus;
  failure_code: string | null;
  failure_message: string | null;
  segment_count: number | null;
  created_at: Timestamp;
  transcribed_at: NullableTimestamp;
  failed_at: NullableTimestamp;
  missing_at: NullableTimestamp;
  start_samples: number | null;
  end_samples: number | null;
  superseded_at: NullableTimestamp;
  pending_at_publication: Generated<boolean>;
  /** J20: the held audio of this untranscribed window was released (operator, or its retention bound). */
  audio_released_at: NullableTimestamp;
  /** B11: the speaker all of this window's audio is (its channel's or track's); null: unknown. */
  speaker_key: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface SegmentsTable {
  id: Generated<string>;
  workspace_id: string;
  meeting_id: string;
  window_id: string;
  seq: number;
  start_ms: number;
  end_ms: number;
  text: string;
  /** W1: the speaker the segment's own source gave it (track, channel, recogniser cluster). */
  speaker_key: ColumnType<string | null, string | null | undefined, string | null>;
  /** The recogniser's word times, relative to the segment's start: [[startMs, endMs, text], ...]. */
  words: ColumnType<WordTimes | null, string | null | undefined, string | null>;
}

export type WordTimes = Array<[number, number, string]>;

/** W1: a meeting's speaker, from the source that knows it. */
export interface SpeakersTable {
  id: Generated<string>;
  workspace_id: string;
  meeting_id: string;
  key: string;
  source: 'participant' | 'track' | 'channel' | 'recogniser';
  label: string;
  display_name: string | null;
  user_id: string | null;
  merged_into: string | null;
  /** W3: a short clip of a recogniser cluster's voice, kept while the meeting's audio is. */
  reference: ColumnType<Buffer | null, Buffer | null | undefined, Buffer | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** W2: one turn of a meeting's speaker timeline. */
export interface SpeakerTurnsTable {
  id: Generated<number>;
  workspace_id: string;
  meeting_id: string;
  speaker_id: string;
  start_ms: number;
  end_ms: number;
}

/** O4: one searchable passage: a stretch of transcript segments, or a line of the minutes (no time). */
export interface SearchPassagesTable {
  id: Generated<string>;
  workspace_id: string;
  meeting_id: string;
  kind: 'transcript' | 'minutes';
  start_ms: number | null;
  end_ms: number | null;
  text: string;
  /** W6: who said it (their name when indexed); null for minutes and unknown speakers. */
  speaker: ColumnType<string | null, string | null | undefined, string | null>;
  /** The segments `text` joins with one space: [startMs, endMs, characters] each; null for minutes. */
  segments: NullableJson;
  /** The text search configuration: 'english' (stemmed) or 'simple'. */
  lang: string;
}

/** O2: what the search index holds of a meeting; behind its meeting, the meeting is in the ledger. */
export interface SearchIndexStateTable {
  meeting_id: string;
  workspace_id: string;
  transcript_revision: number;
  minutes_written_at: Date | null;
  passages: number;
  indexed_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface JobsTable {
  id: string;
  workspace_id: string;
  kind: string;
  queue: string;
  subject_type: string;
  subject_id: string;
  meeting_id: string | null;
  dedupe_key: string | null;
  status: JobStatus;
  payload: Json<Record<string, unknown>>;
  input_revision: Generated<number>;
  attempt_count: Generated<number>;
  error_count: Generated<number>;
  reclaim_count: Generated<number>;
  wait_count: Generated<number>;
  /** The outside outages among those waits (bounded by OUTAGE_WAITS). */
  outage_waits: Generated<number>;
  /** J20: when the job entered the isolated lane (runs alone, in a process of its own); null: never. */
  isolated_at: NullableTimestamp;
  isolation_reason: string | null;
  /** J20: runs it has had in the isolated lane (its backoff grows with them). */
  isolated_runs: Generated<number>;
  /** J20: the last isolated runs in a row whose runner process died: the poison count. */
  runner_deaths: Generated<number>;
  max_errors: number;
  max_reclaims: number;
  run_after: Timestamp;
  delivery_id: string;
  delivered_at: NullableTimestamp;
  dispatch_claimed_at: NullableTimestamp;
  current_attempt_id: string | null;
  last_error_kind: string | null;
  last_error_code: string | null;
  last_error_message: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  running_at: NullableTimestamp;
  pending_at: Timestamp;
  completed_at: NullableTimestamp;
  failed_at: NullableTimestamp;
  canceled_at: NullableTimestamp;
  superseded_at: NullableTimestamp;
  /** F5: 0 for a live meeting's window, 1 otherwise (set by the jobs_fair_round trigger). */
  fair_class: Generated<number>;
  /** F5: the job's round in its workspace's lane of its queue (set when it becomes pending). */
  fair_round: Generated<number>;
}

export interface JobAttemptsTable {
  id: string;
  job_id: string;
  workspace_id: string;
  attempt_no: number;
  status: AttemptOutcome | typeof ATTEMPT_RUNNING;
  context: Json<Record<string, unknown>>;
  input_revision: number;
  owner: string;
  token: string;
  started_at: Timestamp;
  heartbeat_at: Timestamp;
  lease_expires_at: Timestamp;
  ended_at: NullableTimestamp;
  error_kind: string | null;
  error_code: string | null;
  error_message: string | null;
}

export interface WorkersTable {
  id: string;
  hostname: string;
  pid: number;
  pool_ids: ColumnType<string[], string[] | undefined, string[]>;
  started_at: Timestamp;
  heartbeat_at: Timestamp;
  stopped_at: NullableTimestamp;
  declared_dead_at: NullableTimestamp;
  /** J18: the second key of the worker's life lock, and when it was last taken / first seen free. */
  lock_key: number | null;
  lock_taken_at: NullableTimestamp;
  lock_free_since: NullableTimestamp;
}

export interface AuditEventsTable {
  id: Generated<string>;
  workspace_id: string | null;
  subject_type: string;
  subject_id: string;
  from_status: string | null;
  to_status: string;
  actor: string;
  reason: string | null;
  details: NullableJson<Record<string, unknown>>;
  at: Timestamp;
}

export interface OutboxTable {
  id: string;
  workspace_id: string;
  event_type: string;
  consumer: string;
  subject_id: string;
  payload: Json<Record<string, unknown>>;
  status: string;
  attempt_count: Generated<number>;
  max_attempts: number;
  next_attempt_at: Timestamp;
  lease_owner: string | null;
  lease_expires_at: NullableTimestamp;
  last_error: string | null;
  created_at: Timestamp;
  delivered_at: NullableTimestamp;
  failed_at: NullableTimestamp;
}

/** Issue 14: a create's Idempotency-Key and the meeting it made (null once that was deleted). */
export interface MeetingCreateKeysTable {
  workspace_id: string;
  key: string;
  meeting_id: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

/**
 * L23: one row per change of a meeting its live clients follow, made by triggers in the changing
 * transaction. `seq` is its position in the meeting's stream, given after commit (src/meetings/stream-store.ts).
 */
export interface MeetingStreamTable {
  id: Generated<number>;
  workspace_id: string;
  meeting_id: string;
  seq: number | null;
  kind: 'meeting' | 'window' | 'draft';
  ref: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

/** L22: a provisional transcription of one chunk, shown until a window's final words cover it. */
export interface DraftsTable {
  id: Generated<string>;
  workspace_id: string;
  meeting_id: string;
  chunk_seq: number;
  start_ms: number;
  end_ms: number;
  text: string;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

export interface Database {
  workspaces: WorkspacesTable;
  quota_reservations: QuotaReservationsTable;
  stream_counts: StreamCountsTable;
  api_keys: ApiKeysTable;
  users: UsersTable;
  memberships: MembershipsTable;
  sessions: SessionsTable;
  sign_in_throttle: SignInThrottleTable;
  access_links: AccessLinksTable;
  user_identities: UserIdentitiesTable;
  sso_flows: SsoFlowsTable;
  share_links: ShareLinksTable;
  transcript_corrections: TranscriptCorrectionsTable;
  ask_budget: AskBudgetTable;
  fair_clocks: FairClocksTable;
  workspace_budgets: WorkspaceBudgetsTable;
  audit_trail: AuditTrailTable;
  secret_key_checks: SecretKeyChecksTable;
  meetings: MeetingsTable;
  meeting_shares: MeetingSharesTable;
  meeting_create_keys: MeetingCreateKeysTable;
  meeting_stream: MeetingStreamTable;
  drafts: DraftsTable;
  blobs: BlobsTable;
  chunks: ChunksTable;
  object_cleanups: ObjectCleanupsTable;
  batches: BatchesTable;
  calendar_feeds: CalendarFeedsTable;
  calendar_events: CalendarEventsTable;
  bot_backstops: BotBackstopsTable;
  provider_webhook_events: ProviderWebhookEventsTable;
  api_calendar_events: ApiCalendarEventsTable;
  bot_recordings: BotRecordingsTable;
  provider_budgets: ProviderBudgetsTable;
  provider_calls: ProviderCallsTable;
  provider_holds: ProviderHoldsTable;
  speakers: SpeakersTable;
  speaker_turns: SpeakerTurnsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  storage_guards: StorageGuardsTable;
  windows: WindowsTable;
  timeline_gaps: TimelineGapsTable;
  window_tallies: WindowTalliesTable;
  segments: SegmentsTable;
  search_passages: SearchPassagesTable;
  search_index_state: SearchIndexStateTable;
  jobs: JobsTable;
  job_attempts: JobAttemptsTable;
  workers: WorkersTable;
  audit_events: AuditEventsTable;
  outbox: OutboxTable;
}

export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
/** Either a transaction or the pool: store methods that compose into a caller's transaction take this. */
export type Executor = Kysely<Database>;

export type MeetingRow = Selectable<MeetingsTable>;
export type WindowRow = Selectable<WindowsTable>;
export type JobRow = Selectable<JobsTable>;
export type AttemptRow = Selectable<JobAttemptsTable>;
export type NewJob = Insertable<JobsTable>;
