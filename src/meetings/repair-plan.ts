import type { Executor, MeetingRow } from '../db/schema.ts';
import { MeetingSource } from '../domain/status.ts';
import {
  decodeEnergy,
  mapPosition,
  planRepair,
  repairRegions,
  type RegionWindow,
  type RepairInput,
  type RepairPlan,
  type Resize,
  type Span,
  closedTimeline,
  cutOptions,
} from '../domain/timeline.ts';
import type { MeetingDeps } from './deps.ts';
import { basisOf, decodePieces, readPieces, type DecodedPiece } from './live-webm.ts';
import { loadStretch, type ChunkSource } from './timeline-rows.ts';
import { arrivedGaps, chunkObjectKey, pieceReading, seqsPlacedFrom, windowsNear } from './repair-rows.ts';

/**
 * What a repair of late audio works on (docs/live-meetings.md): a snapshot of the arrived chunks,
 * the WebM pieces after them, the windows around them and the cut; the pieces read again; and the
 * plan over the timeline as it will be (the rules are src/domain/timeline.ts). Read-only.
 */

/** Arrived chunks placed by one repair run; the rest wait for the next run of the same job. */
const BATCH = 50;

/** The snapshot a plan was made from no longer holds: plan again (this spends no retry). */
export class Replan extends Error {}

/**
 * One sequence number a repair places or reads again: a chunk that arrived for a reserved stretch,
 * or a WebM piece after it that was read without it (its follower).
 */
export interface Member {
  seq: number;
  kind: 'late' | 'follower';
  /** Old position and length (the reserved stretch, or the piece as it was read). */
  start: number;
  oldLength: number;
  /** A late WAV chunk's length; WebM lengths come from reading the pieces again. */
  length: number | null;
  energy: Buffer | null;
  gapId: string | null;
  /** What a follower was read from before (compared at commit). */
  basisKey: string | null;
}

/**
 * Consecutive members: one resize of the timeline. Its old stretch always holds a reserved gap, so
 * it is never empty, and a piece that read to nothing cannot make two stretches start at one place.
 */
export interface Chain {
  members: Member[];
  start: number;
  oldLength: number;
}

export interface RepairSnapshot {
  meeting: MeetingRow;
  empty: boolean;
  input: RepairInput;
  chains: Chain[];
  /** Chunks placed after the cut of a closed timeline: new audio the tail region takes in. */
  tailSeqs: number[];
  /** Everything the plan depends on, compared again at commit. */
  fingerprint: string;
}

export const lateSeqs = (snapshot: RepairSnapshot) =>
  snapshot.chains.flatMap((c) => c.members.filter((m) => m.kind === 'late').map((m) => m.seq));

/**
 * What a repair run works on, read in one snapshot: arrived gaps (up to a batch; at commit the same
 * ones again), the WebM pieces after them that were read without them, the live windows around
 * each stretch, and the cut. With `gapIds` it reloads exactly those gaps.
 */
export async function loadRepair(
  deps: MeetingDeps,
  db: Executor,
  meetingId: string,
  gapIds: string[] | null,
): Promise<RepairSnapshot | null> {
  const read = async (trx: Executor): Promise<RepairSnapshot | null> => {
    const meeting = await deps.meetings.findById(meetingId, trx);
    if (!meeting || meeting.source !== MeetingSource.live) return null;
    const mode = meeting.audio_deleted_at ? 'splice' : 'recut';
    const members: Member[] = (await arrivedGaps(trx, meetingId, gapIds, BATCH)).map((g) => ({
      seq: g.first_seq,
      kind: 'late',
      start: Number(g.start_samples),
      oldLength: Number(g.reserved),
      length: g.format === 'wav' ? (g.samples ?? 0) : null,
      energy: g.energy,
      gapId: g.id,
      basisKey: null,
    }));
    if (meeting.chunk_format === 'webm') {
      const late = new Set(members.map((m) => m.seq));
      for (const g of members.filter((m) => m.kind === 'late')) {
        // The pieces read after it without it (from their next cluster) are read again, up to the
        // first that had been read normally, whose reader state carries over from them.
        for (let seq = g.seq + 1; !late.has(seq); seq++) {
          const c = await pieceReading(trx, meetingId, seq);
          // A piece whose bytes are gone keeps what it was read as (and its segments).
          if (!c || c.start_samples === null || c.samples === null || c.deleted_at !== null) break;
          members.push({
            seq,
            kind: 'follower',
            start: Number(c.start_samples),
            oldLength: c.samples,
            length: null,
            energy: null,
            gapId: null,
            basisKey: (await basisOf(trx, meetingId, seq)).key,
          });
          if (!c.decoded_after_gap) break;
        }
      }
    }
    members.sort((a, b) => a.seq - b.seq);
    const chains: Chain[] = [];
    for (const m of members) {
      const last = chains.at(-1);
      const lastMember = last?.members.at(-1);
      if (last && lastMember && lastMember.seq + 1 === m.seq) {
        last.members.push(m);
        last.oldLength += m.oldLength;
      } else {
        chains.push({ members: [m], start: m.start, oldLength: m.oldLength });
      }
    }
    const resizes: Resize[] = chains.map((c) => ({
      seq: c.members[0]!.seq,
      start: c.start,
      oldLength: c.oldLength,
      newLength: c.members.reduce((n, m) => n + (m.length ?? m.oldLength), 0),
    }));
    const closed = closedTimeline(meeting);
    const cut = Number(meeting.cut_samples);
    const placed = Number(meeting.placed_samples);
    const tail = (closed || mode === 'splice') && placed > cut;
    const tailSeqs = tail ? await seqsPlacedFrom(trx, meetingId, cut) : [];
    const windows = new Map<string, RegionWindow>();
    const touching = async (from: number, to: number) => {
      const rows = await windowsNear(trx, meetingId, from, to);
      for (const w of rows) {
        if (Number(w.end_samples) < from) continue;
        windows.set(w.id, {
          id: w.id,
          start: Number(w.start_samples),
          end: Number(w.end_samples),
          status: w.status,
        });
      }
    };
    for (const r of resizes) await touching(r.start, r.start + r.oldLength);
    if (tail) await touching(cut, cut);
    const input: RepairInput = {
      mode,
      closed,
      resizes,
      windows: [...windows.values()].sort((a, b) => a.start - b.start),
      cut,
      placed,
    };
    const fingerprint = JSON.stringify({
      mode,
      closed,
      cut: closed || mode === 'splice' ? cut : null,
      placed: tail ? placed : null,
      members: members.map((m) => [m.seq, m.gapId, m.start, m.oldLength, m.length, m.basisKey]),
      // A splice takes a pending window whole (repairRegions): one that stops or starts being
      // pending before the commit changes the plan.
      windows: input.windows.map((w) => [w.id, w.start, w.end, mode === 'splice' && w.status === 'pending']),
    });
    return { meeting, empty: resizes.length === 0 && !tail, input, chains, tailSeqs, fingerprint };
  };
  if (db === deps.db) {
    return deps.db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(read);
  }
  return read(db);
}

/** Late WebM pieces and their followers, read (decoded) from their new basis, outside locks. */
export async function decodeResized(deps: MeetingDeps, snapshot: RepairSnapshot): Promise<DecodedPiece[]> {
  if (snapshot.meeting.chunk_format !== 'webm') return [];
  const out: DecodedPiece[] = [];
  for (const chain of snapshot.chains) {
    const seqs = chain.members.map((m) => m.seq);
    const basis = await basisOf(deps.db, snapshot.meeting.id, seqs[0]!);
    // A piece whose bytes are gone reads as nothing; if they went under this plan (the audio was
    // deleted meanwhile), the commit sees the changed follower list and plans again.
    const pieces = await readPieces(deps, snapshot.meeting.id, seqs);
    out.push(...(await decodePieces(deps, snapshot.meeting, basis, pieces)));
  }
  return out;
}

/** A chain member on the repaired timeline: where it starts and how long it is now. */
export interface Placement {
  member: Member;
  start: number;
  length: number;
}

export interface Prepared {
  plan: RepairPlan;
  resizes: Resize[];
  placements: Placement[];
  /** The chunks' audio on the repaired timeline (new positions), for recognition. */
  sources: ChunkSource[];
}

/**
 * The plan over the timeline as it will be: each chain at its real length, its members one after
 * the other, everything after it moved. Audio that was deleted counts as silence (splice mode
 * plans around it).
 */
export async function prepare(
  deps: MeetingDeps,
  snapshot: RepairSnapshot,
  decoded: DecodedPiece[],
): Promise<Prepared> {
  const byDecoded = new Map(decoded.map((d) => [d.seq, d]));
  const lengthOf = (m: Member) => byDecoded.get(m.seq)?.samples ?? m.length ?? m.oldLength;
  const placements: Placement[] = [];
  const resizes: Resize[] = [];
  let shift = 0;
  for (const chain of snapshot.chains) {
    let at = chain.start + shift;
    let newLength = 0;
    for (const m of chain.members) {
      placements.push({ member: m, start: at, length: lengthOf(m) });
      at += lengthOf(m);
      newLength += lengthOf(m);
    }
    resizes.push({ seq: chain.members[0]!.seq, start: chain.start, oldLength: chain.oldLength, newLength });
    shift += newLength - chain.oldLength;
  }
  const input: RepairInput = { ...snapshot.input, resizes };
  const placed = new Set(placements.map((p) => p.member.seq));
  const spans: Span[] = [];
  const sources: ChunkSource[] = [];
  const map = (p: number) => mapPosition(resizes, p);
  for (const region of repairRegions(input)) {
    const stretch = await loadStretch(deps.db, snapshot.meeting.id, region.from, region.to);
    for (const s of stretch.spans) {
      if (s.ref !== undefined && placed.has(s.ref.seq)) continue;
      const at = map(s.start);
      if (at !== null) spans.push({ ...s, start: at });
    }
    for (const src of stretch.sources) {
      if (placed.has(src.seq)) continue;
      const at = map(src.start);
      if (at !== null)
        sources.push({ ...src, start: at, deleted: false, objectKey: src.deleted ? null : src.objectKey });
    }
  }
  for (const p of placements) {
    const d = byDecoded.get(p.member.seq);
    const energy = d ? decodeEnergy(d.energy) : decodeEnergy(p.member.energy);
    const objectKey = d
      ? (d.pcm?.key ?? null)
      : await chunkObjectKey(deps.db, snapshot.meeting.id, p.member.seq);
    const audio = p.length > 0 && objectKey !== null;
    spans.push({ start: p.start, length: p.length, audio, energy: audio ? energy : null });
    sources.push({
      seq: p.member.seq,
      start: p.start,
      length: p.length,
      objectKey: audio ? objectKey : null,
      deleted: false,
    });
  }
  const sortedSpans = [...new Map(spans.map((s) => [`${s.start}:${s.length}:${s.audio}`, s])).values()].sort(
    (a, b) => a.start - b.start,
  );
  const sortedSources = [...new Map(sources.map((s) => [s.seq, s])).values()].sort(
    (a, b) => a.start - b.start,
  );
  const plan = planRepair(
    input,
    sortedSpans,
    cutOptions(snapshot.meeting.window_ms, deps.config.boundarySearchMs),
  );
  return { plan, resizes, placements, sources: sortedSources };
}
