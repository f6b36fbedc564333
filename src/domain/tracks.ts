/**
 * L25: a live meeting's tracks. The microphone is the meeting's own timeline (the track `mic`); a
 * browser tab's or the screen's audio is a second track with its own timeline, windows, drafts,
 * repair and close-out (a live meeting under its parent, migration 0038). Each track is a speaker
 * of the parent meeting ("You", "Others"), and the transcript interleaves them by time.
 *
 * A call's voices played through the speakers leak into the microphone: transcribed as they are,
 * they would appear twice, once under "You". The echo rule (`dropEchoes`) is the dominance rule of
 * src/domain/channels.ts on the tracks' stored energy (10 ms steps, kept with each chunk): a word
 * of one track is shown only where that track is kept for at least half of the word's sounding
 * frames; where another track dominates, the word is the echo of that track's and is not shown a
 * second time. A segment without word times (a Whisper server's) is decided whole and may hold
 * the person's own words beside the echo, so it is left out only where its track is its own in
 * under a quarter of its sounding frames (an echo shown twice rather than a word lost). It is decided when the transcript is read, so a
 * track's audio that comes late decides again, and nothing stored is removed.
 */
import { DOMINANCE, keptFrames, type DominanceOptions } from './channels.ts';
import type { SpokenSegment } from './speakers.ts';

/** The meeting's own timeline: the microphone. */
export const PRIMARY_TRACK = 'mic';
/** The microphone and up to fifteen more (a tab shared again is a track of its own). */
export const MAX_TRACKS = 16;
const TRACK_NAME = /^[a-z][a-z0-9-]{0,31}$/;

export function isTrackName(text: string): boolean {
  return TRACK_NAME.test(text);
}

/** A track's speaker: `tab-2` (the tab shared a second time) is the same speaker as `tab`. */
function speakerTrack(track: string): string {
  return track.replace(/-\d+$/, '');
}

/** The speaker key of a track's words. */
export function trackSpeakerKey(track: string): string {
  return `track:${speakerTrack(track)}`;
}

/** The label a track's speaker has until a person names it. */
export function trackLabel(track: string): string {
  const base = speakerTrack(track);
  if (base === PRIMARY_TRACK) return 'You';
  if (base === 'tab' || base === 'screen' || base === 'call') return 'Others';
  return base;
}

/** One stretch of a track's placed audio on the parent's timeline, and its energy if known. */
export interface EnergySpan {
  startMs: number;
  lengthMs: number;
  /** Mean square per 10 ms step from `startMs`; null: audio of unknown energy. */
  energy: Float32Array | null;
}

export interface TrackWords {
  track: string;
  /** On the parent's timeline. */
  segments: SpokenSegment[];
  spans: EnergySpan[];
}

export interface TrackSegment extends SpokenSegment {
  track: string;
}

const STEP_MS = 10;

/**
 * Every track's segments on one timeline, in order, each word another track dominates left out
 * (see above). A word over audio of unknown energy, or over silence in every track, is kept: the
 * rule drops a word only on evidence that another track holds it. `dropped` counts words left out.
 */
export function dropEchoes(
  tracks: TrackWords[],
  options: DominanceOptions = DOMINANCE,
): { segments: TrackSegment[]; dropped: number } {
  const all = tracks.flatMap((t) => t.segments.map((s) => ({ ...s, track: t.track })));
  const byStart = (a: TrackSegment, b: TrackSegment) => a.startMs - b.startMs || a.endMs - b.endMs;
  if (tracks.length < 2) return { segments: all.sort(byStart), dropped: 0 };
  const spans = tracks.map((t) => [...t.spans].sort((a, b) => a.startMs - b.startMs));
  // Each word is decided on the frames around it alone (its hold on either side), so the work
  // follows the words, not where on the timeline the tracks lie.
  const margin = options.holdMs + options.frameMs;
  const share = (ti: number, fromMs: number, toMs: number): number | null => {
    const from = Math.floor((fromMs - margin) / options.frameMs) * options.frameMs;
    const frames = Math.max(1, Math.ceil((toMs + margin - from) / options.frameMs));
    const levels = spans.map((own) => frameLevels(own, from, frames, options.frameMs));
    const keep = keptFrames(
      levels.map((l) => l.energy),
      options,
    );
    const floor = options.floorRms * options.floorRms;
    const first = Math.floor((fromMs - from) / options.frameMs);
    const last = Math.min(frames, Math.max(first + 1, Math.ceil((toMs - from) / options.frameMs)));
    let sounding = 0;
    let own = 0;
    for (let f = first; f < last; f++) {
      if (levels[ti]!.unknown[f]) return null;
      let loudest = 0;
      for (const l of levels) loudest = Math.max(loudest, l.energy[f]!);
      if (loudest < floor) continue;
      sounding++;
      if (keep[ti]![f]) own++;
    }
    return sounding === 0 ? null : own / sounding;
  };
  let dropped = 0;
  const out: TrackSegment[] = [];
  tracks.forEach((t, ti) => {
    for (const s of t.segments) {
      if (!s.words || s.words.length === 0) {
        // Without word times the segment is decided whole; it may hold the person's own words
        // beside the echo, so it is left out only when the track is (almost) nowhere its own.
        const own = share(ti, s.startMs, s.endMs);
        if (own === null || own >= WHOLE_SEGMENT_SHARE) out.push({ ...s, track: t.track });
        else dropped += s.text.split(/\s+/).filter(Boolean).length;
        continue;
      }
      const words = s.words.filter((w) => {
        const own = share(ti, w.startMs, w.endMs);
        return own === null || own >= 0.5;
      });
      dropped += s.words.length - words.length;
      if (words.length === s.words.length) out.push({ ...s, track: t.track });
      else if (words.length > 0)
        out.push({
          ...s,
          track: t.track,
          startMs: words[0]!.startMs,
          endMs: words[words.length - 1]!.endMs,
          text: words.map((w) => w.text).join(' '),
          words,
        });
    }
  });
  return { segments: out.sort(byStart), dropped };
}

/** A segment without word times is the echo only where its track is its own in under this share. */
const WHOLE_SEGMENT_SHARE = 0.25;

/**
 * A track's energy per frame over `frames` frames from `fromMs` (0 where it has no audio), and
 * where it is unknown. `spans` are sorted by start.
 */
function frameLevels(
  spans: EnergySpan[],
  fromMs: number,
  frames: number,
  frameMs: number,
): { energy: Float64Array; unknown: Uint8Array } {
  const sum = new Float64Array(frames);
  const count = new Float64Array(frames);
  const unknown = new Uint8Array(frames);
  const toMs = fromMs + frames * frameMs;
  // The first span that may reach into the stretch: spans do not overlap within a track.
  let lo = 0;
  let hi = spans.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (spans[mid]!.startMs + spans[mid]!.lengthMs <= fromMs) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < spans.length && spans[i]!.startMs < toMs; i++) {
    const s = spans[i]!;
    if (!s.energy) {
      const first = Math.max(0, Math.floor((s.startMs - fromMs) / frameMs));
      const last = Math.min(frames, Math.ceil((s.startMs + s.lengthMs - fromMs) / frameMs));
      for (let f = first; f < last; f++) unknown[f] = 1;
      continue;
    }
    const k0 = Math.max(0, Math.floor((fromMs - s.startMs) / STEP_MS));
    const k1 = Math.min(s.energy.length, Math.ceil((toMs - s.startMs) / STEP_MS));
    for (let k = k0; k < k1; k++) {
      const f = Math.floor((s.startMs + k * STEP_MS - fromMs) / frameMs);
      if (f < 0 || f >= frames) continue;
      sum[f] = sum[f]! + s.energy[k]!;
      count[f] = count[f]! + 1;
    }
  }
  const energy = new Float64Array(frames);
  for (let f = 0; f < frames; f++) energy[f] = count[f]! > 0 ? sum[f]! / count[f]! : 0;
  return { energy, unknown };
}
