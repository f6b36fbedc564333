/**
 * W1/W2: who said it. Speakers come only from sources that know them: a segment's own source (its
 * track, its channel, a diarizing recogniser's cluster) or a speaker timeline (a bot provider's
 * turns). Where neither says, the speaker is unknown: never guessed.
 */

/** Where a speaker comes from. */
export const SpeakerSource = {
  participant: 'participant',
  track: 'track',
  channel: 'channel',
  recogniser: 'recogniser',
} as const;
export type SpeakerSource = (typeof SpeakerSource)[keyof typeof SpeakerSource];

/**
 * How a segment got its speaker: `source`, from its own audio's source (track, channel, cluster);
 * `turn`, every turn it overlaps is that speaker's; `split`, it spanned a change of speaker and was
 * split at the recogniser's word times; `overlap`, it spanned a change, no word times were known,
 * and it went to the speaker of the largest overlap (so it may hold another speaker's words).
 */
export const Attribution = { source: 'source', turn: 'turn', split: 'split', overlap: 'overlap' } as const;
export type Attribution = (typeof Attribution)[keyof typeof Attribution];

/** A word with its times on the meeting's timeline. */
export interface TimedWord {
  startMs: number;
  endMs: number;
  text: string;
}

export interface SpokenSegment {
  startMs: number;
  endMs: number;
  text: string;
  /** The speaker the segment's own source gave it, if any. */
  speakerKey: string | null;
  /** The recogniser's word times, where it gave them. */
  words: TimedWord[] | null;
}

export interface SpeakerTurn {
  startMs: number;
  endMs: number;
  speakerKey: string;
}

export interface AttributedSegment {
  startMs: number;
  endMs: number;
  text: string;
  speakerKey: string | null;
  attribution: Attribution | null;
}

/**
 * W2: attributes each segment. One with a speaker from its own source keeps it. Otherwise, from
 * the turns it overlaps: all of one speaker → that speaker; several → split at the word times (each
 * word to the speaker it overlaps most; a word between turns to the nearest turn's), or, without
 * word times, the speaker of the largest overlap, marked `overlap`. A segment no turn overlaps has
 * no speaker.
 */
export function attributeSegments(segments: SpokenSegment[], turns: SpeakerTurn[]): AttributedSegment[] {
  const timeline = new TurnIndex(turns);
  const out: AttributedSegment[] = [];
  for (const s of segments) {
    const base = { startMs: s.startMs, endMs: s.endMs, text: s.text };
    if (s.speakerKey !== null) {
      out.push({ ...base, speakerKey: s.speakerKey, attribution: Attribution.source });
      continue;
    }
    const shares = timeline.shares(s.startMs, s.endMs);
    if (shares.size === 0) {
      out.push({ ...base, speakerKey: null, attribution: null });
      continue;
    }
    if (shares.size === 1) {
      out.push({ ...base, speakerKey: [...shares.keys()][0]!, attribution: Attribution.turn });
      continue;
    }
    const words = (s.words ?? []).filter((w) => w.text.trim() !== '');
    if (words.length > 0) {
      const parts = splitByWords(words, timeline);
      if (parts.length === 1)
        out.push({ ...base, speakerKey: parts[0]!.speakerKey, attribution: Attribution.turn });
      else out.push(...parts.map((p) => ({ ...p, attribution: Attribution.split })));
      continue;
    }
    out.push({ ...base, speakerKey: largest(shares), attribution: Attribution.overlap });
  }
  return out;
}

function splitByWords(
  words: TimedWord[],
  timeline: TurnIndex,
): Array<{ startMs: number; endMs: number; text: string; speakerKey: string }> {
  const parts: Array<{ startMs: number; endMs: number; text: string; speakerKey: string }> = [];
  for (const w of words) {
    const shares = timeline.shares(w.startMs, w.endMs);
    const key = shares.size > 0 ? largest(shares) : timeline.nearest((w.startMs + w.endMs) / 2);
    const last = parts.at(-1);
    if (last && last.speakerKey === key) {
      last.endMs = Math.max(last.endMs, w.endMs);
      last.text = `${last.text} ${w.text.trim()}`;
    } else parts.push({ startMs: w.startMs, endMs: w.endMs, text: w.text.trim(), speakerKey: key });
  }
  return parts;
}

/** The key with the largest share; on a tie, the one met first (earliest turn). */
function largest(shares: Map<string, number>): string {
  let best: string | null = null;
  let bestMs = -1;
  for (const [key, ms] of shares) {
    if (ms > bestMs) {
      best = key;
      bestMs = ms;
    }
  }
  return best!;
}

/** Turns sorted by start, with the running maximum of their ends, for overlap queries. */
class TurnIndex {
  private readonly turns: SpeakerTurn[];
  private readonly maxEnd: number[];

  constructor(turns: SpeakerTurn[]) {
    this.turns = turns.filter((t) => t.endMs >= t.startMs).sort((a, b) => a.startMs - b.startMs);
    let max = -Infinity;
    this.maxEnd = this.turns.map((t) => (max = Math.max(max, t.endMs)));
  }

  /**
   * How many ms of [startMs, endMs) each speaker's turns cover (a zero-length stretch counts as
   * one ms). Speakers in the order of their first overlapping turn.
   */
  shares(startMs: number, endMs: number): Map<string, number> {
    const end = Math.max(endMs, startMs + 1);
    const found: Array<{ turn: SpeakerTurn; ms: number }> = [];
    for (let i = this.countStartingBefore(end) - 1; i >= 0 && this.maxEnd[i]! > startMs; i--) {
      const t = this.turns[i]!;
      const ms = Math.min(end, t.endMs) - Math.max(startMs, t.startMs);
      if (ms > 0) found.push({ turn: t, ms });
    }
    found.sort((a, b) => a.turn.startMs - b.turn.startMs);
    const shares = new Map<string, number>();
    for (const f of found) shares.set(f.turn.speakerKey, (shares.get(f.turn.speakerKey) ?? 0) + f.ms);
    return shares;
  }

  /** The speaker of the turn nearest to an instant (there is at least one turn). */
  nearest(atMs: number): string {
    let best = this.turns[0]!;
    let bestGap = Infinity;
    for (const t of this.turns) {
      const gap = atMs < t.startMs ? t.startMs - atMs : atMs > t.endMs ? atMs - t.endMs : 0;
      if (gap < bestGap) {
        best = t;
        bestGap = gap;
      }
    }
    return best.speakerKey;
  }

  /** How many turns start before `ms` (binary search). */
  private countStartingBefore(ms: number): number {
    let lo = 0;
    let hi = this.turns.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.turns[mid]!.startMs < ms) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/**
 * R11: a bot provider's speaker timeline as turns on the recording's timeline. Offsets are seconds
 * relative to the start of the recording: one before it (a speaker already talking when the bot
 * started recording) starts at 0; a turn without an end lasts until the next turn starts (or
 * `recordingMs`, when known, else a minute at most). Turns wholly before the recording are dropped.
 */
export function turnsFromTimeline(
  events: Array<{ speakerKey: string; startS: number; endS: number | null }>,
  recordingMs: number | null,
): SpeakerTurn[] {
  const sorted = [...events].filter((e) => Number.isFinite(e.startS)).sort((a, b) => a.startS - b.startS);
  const turns: SpeakerTurn[] = [];
  sorted.forEach((e, i) => {
    const next = sorted[i + 1];
    const openEndS =
      next !== undefined ? next.startS : recordingMs !== null ? recordingMs / 1000 : e.startS + 60;
    const endS = e.endS !== null && Number.isFinite(e.endS) ? e.endS : openEndS;
    const startMs = Math.max(0, Math.round(e.startS * 1000));
    const endMs = Math.round(endS * 1000);
    if (endMs <= 0 || endMs < startMs) return;
    turns.push({ startMs, endMs, speakerKey: e.speakerKey });
  });
  return turns;
}

/**
 * R11: which participant objects are one person. A meeting platform may report a re-join as a new
 * participant object: the same e-mail, or failing that the same display name, is the same speaker.
 * A participant with neither is its own speaker, by its provider id.
 */
export function participantKey(p: {
  id: string | number;
  name: string | null;
  email: string | null;
}): string {
  const email = p.email?.trim().toLowerCase();
  if (email) return `participant:email:${email}`;
  const name = p.name?.trim().replace(/\s+/g, ' ');
  if (name) return `participant:name:${name.toLowerCase()}`;
  return `participant:id:${String(p.id)}`;
}

/** W4: the speaker a chain of merges ends at (a chain is cut after 32 hops; never a loop). */
export function mergedTarget<S extends { id: string; merged_into: string | null }>(
  byId: Map<string, S>,
  speaker: S,
): S {
  let s = speaker;
  for (let hops = 0; s.merged_into && hops < 32; hops++) s = byId.get(s.merged_into) ?? s;
  return s;
}

/** A speaker as a transcript names it. */
export interface SpeakerRef {
  id: string;
  /** The name a person gave it, else the source's label. */
  name: string;
  source: SpeakerSource;
}

/** A transcript's segment as read: its speaker, where a source knows it, and how it was given. */
export interface TranscriptLine {
  startMs: number;
  endMs: number;
  text: string;
  speaker: SpeakerRef | null;
  attribution: Attribution | null;
}

/**
 * W1/W4: the speakers of attributed segments, by key, as people named and merged them: a merged
 * speaker reads as the one it was merged into. A key no speaker row holds (none should) keeps
 * its words unattributed rather than invent a name.
 */
export function nameSpeakers(
  segments: AttributedSegment[],
  speakers: Array<{
    id: string;
    key: string;
    source: SpeakerSource;
    label: string;
    display_name: string | null;
    merged_into: string | null;
  }>,
): TranscriptLine[] {
  const byId = new Map(speakers.map((s) => [s.id, s]));
  const byKey = new Map(speakers.map((s) => [s.key, s]));
  const resolve = (key: string): SpeakerRef | null => {
    const found = byKey.get(key);
    const s = found ? mergedTarget(byId, found) : undefined;
    return s ? { id: s.id, name: s.display_name ?? s.label, source: s.source } : null;
  };
  return segments.map((s) => {
    const speaker = s.speakerKey === null ? null : resolve(s.speakerKey);
    return {
      startMs: s.startMs,
      endMs: s.endMs,
      text: s.text,
      speaker,
      attribution: speaker ? s.attribution : null,
    };
  });
}
