/**
 * L25: a live meeting's tracks. The microphone is the meeting's own timeline (the track `mic`); a
 * browser tab's or the screen's audio is a second track with its own timeline, windows, drafts,
 * repair and close-out (a live meeting under its parent, migration 0038). Each track is a speaker
 * of the parent meeting ("You", "Others"), and the transcript interleaves them by time.
 *
 * A call's voices played through the speakers leak into the microphone: transcribed as they are,
 * they would appear twice, once under "You". The echo rule (`dropEchoes`) is the dominance rule of
 * src/domain/channels.ts on the tracks' stored energy (10 ms steps, kept with each chunk): a word
 * (or a segment without word times) of one track is shown only where that track is kept for at
 * least half of the word's sounding frames; where another track dominates, the word is the echo
 * of that track's and is not shown a second time. It is decided when the transcript is read, so a
 * track's audio that comes late decides again, and nothing stored is removed.
 */
import { DOMINANCE, keptFrames, type DominanceOptions } from './channels.ts';
import type { SpokenSegment } from './speakers.ts';

/** The meeting's own timeline: the microphone. */
export const PRIMARY_TRACK = 'mic';
/** The microphone and up to three more. */
export const MAX_TRACKS = 4;
const TRACK_NAME = /^[a-z][a-z0-9-]{0,31}$/;

export function isTrackName(text: string): boolean {
  return TRACK_NAME.test(text);
}

/** The speaker key of a track's words. */
export function trackSpeakerKey(track: string): string {
  return `track:${track}`;
}

/** The label a track's speaker has until a person names it. */
export function trackLabel(track: string): string {
  if (track === PRIMARY_TRACK) return 'You';
  if (track === 'tab' || track === 'screen' || track === 'call') return 'Others';
  return track;
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
  const frameMs = options.frameMs;
  const endMs = Math.max(
    0,
    ...tracks.flatMap((t) => t.spans.map((s) => s.startMs + s.lengthMs)),
    ...all.map((s) => s.endMs),
  );
  const frames = Math.ceil(endMs / frameMs) + 1;
  const levels = tracks.map((t) => frameLevels(t.spans, frames, frameMs));
  const keep = keptFrames(
    levels.map((l) => l.energy),
    options,
  );
  const floor = options.floorRms * options.floorRms;
  const shown = (ti: number, fromMs: number, toMs: number): boolean => {
    const first = Math.max(0, Math.floor(fromMs / frameMs));
    const last = Math.min(frames, Math.max(first + 1, Math.ceil(toMs / frameMs)));
    let sounding = 0;
    let own = 0;
    for (let f = first; f < last; f++) {
      if (levels[ti]!.unknown[f]) return true;
      let loudest = 0;
      for (const l of levels) loudest = Math.max(loudest, l.energy[f]!);
      if (loudest < floor) continue;
      sounding++;
      if (keep[ti]![f]) own++;
    }
    return sounding === 0 || own * 2 >= sounding;
  };
  let dropped = 0;
  const out: TrackSegment[] = [];
  tracks.forEach((t, ti) => {
    for (const s of t.segments) {
      if (!s.words || s.words.length === 0) {
        if (shown(ti, s.startMs, s.endMs)) out.push({ ...s, track: t.track });
        else dropped += s.text.split(/\s+/).filter(Boolean).length;
        continue;
      }
      const words = s.words.filter((w) => shown(ti, w.startMs, w.endMs));
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

/** A track's energy per frame on the parent's timeline (0 where it has no audio), and where unknown. */
function frameLevels(
  spans: EnergySpan[],
  frames: number,
  frameMs: number,
): { energy: Float64Array; unknown: Uint8Array } {
  const sum = new Float64Array(frames);
  const count = new Float64Array(frames);
  const unknown = new Uint8Array(frames);
  for (const s of spans) {
    if (!s.energy) {
      const first = Math.max(0, Math.floor(s.startMs / frameMs));
      const last = Math.min(frames, Math.ceil((s.startMs + s.lengthMs) / frameMs));
      for (let f = first; f < last; f++) unknown[f] = 1;
      continue;
    }
    for (let k = 0; k < s.energy.length; k++) {
      const f = Math.floor((s.startMs + k * STEP_MS) / frameMs);
      if (f < 0 || f >= frames) continue;
      sum[f] = sum[f]! + s.energy[k]!;
      count[f] = count[f]! + 1;
    }
  }
  const energy = new Float64Array(frames);
  for (let f = 0; f < frames; f++) energy[f] = count[f]! > 0 ? sum[f]! / count[f]! : 0;
  return { energy, unknown };
}
