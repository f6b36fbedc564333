import type { MeetingRow, Tx } from '../db/schema.ts';
import { withTenant } from '../db/tenant.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { EventType } from '../domain/status.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { MeetingDeps } from './deps.ts';
import { mergedTarget, participantKey, SpeakerSource, turnsFromTimeline } from '../domain/speakers.ts';
import type { BotSpeakers } from '../ports.ts';
import {
  ensureSpeakers,
  replaceTurns,
  mergeSpeaker,
  renameSpeaker,
  speakerById,
  saveVocabulary,
  speakersChanged,
  speakersOf,
  vocabularyOf,
  type SpeakerRow,
} from './speaker-store.ts';

/** W1: a speaker as the API shows it. */
export interface SpeakerView {
  id: string;
  name: string;
  label: string;
  displayName: string | null;
  source: SpeakerRow['source'];
  mergedInto: string | null;
  /**
   * W3: `meeting` when the source knows this person for the whole meeting; `window` for a
   * recogniser's cluster that holds only within one window of audio (the same person may be
   * several such speakers: merge them).
   */
  scope: 'meeting' | 'window';
}

export const MAX_SPEAKER_NAME = 200;

function view(s: SpeakerRow): SpeakerView {
  return {
    id: s.id,
    name: s.display_name ?? s.label,
    label: s.label,
    displayName: s.display_name,
    source: s.source,
    mergedInto: s.merged_into,
    scope: s.key.startsWith('cluster:w:') ? 'window' : 'meeting',
  };
}

/** W1: the meeting's speakers, those merged into another included (with `mergedInto`). */
export async function listSpeakers(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
): Promise<SpeakerView[]> {
  return withTenant(deps.db, workspaceId, async (trx) => {
    const meeting = await deps.meetings.get(workspaceId, meetingId, trx);
    return (await speakersOf(trx, meeting.id)).map(view);
  });
}

/**
 * W4: a person names a speaker (null gives it back its source's label). A published transcript
 * gets a new revision and `meeting.transcript_revised`; minutes and search follow it.
 */
export async function nameSpeaker(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  speakerId: string,
  name: string | null,
): Promise<SpeakerView> {
  return withTenant(deps.db, workspaceId, async (trx) => {
    const meeting = await lockedMeeting(deps, trx, workspaceId, meetingId);
    const speaker = await found(trx, meeting.id, speakerId);
    if (speaker.display_name === name) return view(speaker);
    await renameSpeaker(trx, speaker.id, name);
    await revise(
      trx,
      meeting,
      `speaker ${speaker.id} named ${name === null ? '(its label)' : JSON.stringify(name)}`,
      {
        speakerId: speaker.id,
      },
    );
    return view({ ...speaker, display_name: name });
  });
}

/**
 * W4: two speakers are one person: `fromId` (and every speaker merged into it before) reads as
 * `intoId` from now on, in every segment and turn. A new transcript revision, as for a rename.
 */
export async function mergeSpeakers(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  fromId: string,
  intoId: string,
): Promise<SpeakerView> {
  return withTenant(deps.db, workspaceId, async (trx) => {
    const meeting = await lockedMeeting(deps, trx, workspaceId, meetingId);
    const from = await found(trx, meeting.id, fromId);
    await found(trx, meeting.id, intoId);
    const all = await speakersOf(trx, meeting.id);
    const target = finalOf(all, intoId);
    if (finalOf(all, from.id).id === target.id)
      throw new AppError(
        ErrorKind.conflict,
        'speaker.same',
        'these speakers are already one: pick two different speakers to merge',
      );
    await mergeSpeaker(trx, meeting.id, from.id, target.id);
    await revise(trx, meeting, `speaker ${from.id} merged into ${target.id}`, {
      speakerId: from.id,
      into: target.id,
    });
    return view(target);
  });
}

/** The speaker a chain of merges ends at. */
function finalOf(all: SpeakerRow[], id: string): SpeakerRow {
  const byId = new Map(all.map((s) => [s.id, s]));
  return mergedTarget(byId, byId.get(id)!);
}

async function lockedMeeting(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  meetingId: string,
): Promise<MeetingRow> {
  const meeting = await deps.meetings.get(workspaceId, meetingId, trx);
  return deps.meetings.lock(trx, meeting.id);
}

async function found(trx: Tx, meetingId: string, speakerId: string): Promise<SpeakerRow> {
  const speaker = isUuid(speakerId) ? await speakerById(trx, meetingId, speakerId) : undefined;
  if (!speaker)
    throw new AppError(ErrorKind.notFound, 'speaker.not_found', `no speaker ${speakerId} in this meeting`);
  return speaker;
}

/**
 * W4: who said what changed. A published transcript gets a new revision, its minutes are written
 * again and `meeting.transcript_revised` goes out (search re-indexes on it); an unpublished one is
 * read with the change when it is published.
 */
export async function revise(
  trx: Tx,
  meeting: MeetingRow,
  reason: string,
  details: Record<string, unknown>,
  actor = 'api',
  cause: { speakers: true } | { correctionId: string } = { speakers: true },
): Promise<void> {
  const published = meeting.transcript_completed_at !== null;
  const updated = { transcript_revision: await speakersChanged(trx, meeting.id, published) };
  await recordAudit(trx, {
    workspaceId: meeting.workspace_id,
    subjectType: 'meeting',
    subjectId: meeting.id,
    from: meeting.status,
    to: meeting.status,
    actor,
    reason: reason.slice(0, 500),
    details: { ...details, revision: updated.transcript_revision },
  });
  if (published)
    await emitEvent(trx, {
      workspaceId: meeting.workspace_id,
      type: EventType.meetingTranscriptRevised,
      subjectId: meeting.id,
      payload: { meetingId: meeting.id, revision: updated.transcript_revision, ...cause },
    });
}

/**
 * R11: a bot meeting's speakers are the provider's participants who spoke, one per person (a
 * re-join is the same speaker), and its timeline is their turns, replaced whole (an import run
 * twice leaves one copy). Names people gave are kept. A published transcript gets a new revision.
 */
export async function applyBotSpeakers(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  speakers: BotSpeakers,
  actor: string,
): Promise<{ speakers: number; turns: number }> {
  const keyed = speakers.timeline.map((t) => ({ ...t, key: participantKey(t.participant) }));
  const people = new Map<string, { key: string; source: SpeakerSource; label: string }>();
  for (const t of keyed) {
    if (people.has(t.key)) continue;
    // The participant list may name someone the timeline gives no name.
    const known = speakers.participants.find((p) => participantKey(p) === t.key || p.id === t.participant.id);
    const name = t.participant.name ?? known?.name ?? null;
    people.set(t.key, {
      key: t.key,
      source: SpeakerSource.participant,
      label: name ?? `Participant ${t.participant.id}`,
    });
  }
  {
    const meeting = await deps.meetings.lock(trx, meetingId);
    const rows = await ensureSpeakers(trx, meeting, [...people.values()]);
    const turns = turnsFromTimeline(
      keyed.map((t) => ({ speakerKey: t.key, startS: t.startS, endS: t.endS })),
      meeting.duration_ms,
    );
    await replaceTurns(
      trx,
      meeting,
      turns.map((t) => ({ speakerId: rows.get(t.speakerKey)!.id, startMs: t.startMs, endMs: t.endMs })),
    );
    await revise(
      trx,
      meeting,
      `speaker timeline imported: ${people.size} speakers, ${turns.length} turns`,
      {
        speakers: people.size,
        turns: turns.length,
      },
      actor,
    );
    return { speakers: people.size, turns: turns.length };
  }
}

/** W7: at most this many terms, each at most this long. */
export const MAX_VOCABULARY_TERMS = 200;
export const MAX_TERM_LENGTH = 64;

/** W7: a workspace's vocabulary, and whether the configured recogniser uses it. */
export interface VocabularyView {
  terms: string[];
  applied: boolean;
  note: string;
}

function vocabularyView(deps: MeetingDeps, terms: string[]): VocabularyView {
  const applied = deps.transcriber.takesVocabulary === true;
  return {
    terms,
    applied,
    note: applied
      ? 'Given to the speech recogniser as a glossary with every window, with the meeting’s language.'
      : deps.config.asr.kind === 'pocketsphinx'
        ? 'Kept, but not used: the offline recogniser (PocketSphinx) takes no vocabulary. A Whisper-compatible server uses it.'
        : 'Kept, but not used: the configured recogniser (a diarizing model) takes no prompt.',
  };
}

export async function getVocabulary(deps: MeetingDeps, workspaceId: string): Promise<VocabularyView> {
  return vocabularyView(
    deps,
    await withTenant(deps.db, workspaceId, (trx) => vocabularyOf(trx, workspaceId)),
  );
}

/**
 * W7: replaces the workspace's vocabulary: names and product terms its meetings use, each trimmed,
 * duplicates (any case) dropped. Bad input is refused with what is wrong; nothing is changed then.
 */
export async function setVocabulary(
  deps: MeetingDeps,
  workspaceId: string,
  input: unknown,
): Promise<VocabularyView> {
  const terms = (input as { terms?: unknown } | null)?.terms;
  if (!Array.isArray(terms))
    throw new AppError(
      ErrorKind.invalidInput,
      'vocabulary.terms',
      'send {"terms": ["Verbatim", "Kysely", …]}',
    );
  if (terms.length > MAX_VOCABULARY_TERMS)
    throw new AppError(
      ErrorKind.invalidInput,
      'vocabulary.terms',
      `at most ${MAX_VOCABULARY_TERMS} terms (${terms.length} given)`,
    );
  const seen = new Set<string>();
  const kept: string[] = [];
  for (const [i, raw] of terms.entries()) {
    const term = typeof raw === 'string' ? raw.replace(/\s+/g, ' ').trim() : '';
    // eslint-disable-next-line no-control-regex
    if (term === '' || term.length > MAX_TERM_LENGTH || /[\u0000-\u001f\u007f]/.test(term))
      throw new AppError(
        ErrorKind.invalidInput,
        'vocabulary.terms',
        `term ${i + 1} must be a non-empty string of at most ${MAX_TERM_LENGTH} characters`,
      );
    if (seen.has(term.toLowerCase())) continue;
    seen.add(term.toLowerCase());
    kept.push(term);
  }
  await withTenant(deps.db, workspaceId, (trx) => saveVocabulary(trx, workspaceId, kept));
  return vocabularyView(deps, kept);
}
