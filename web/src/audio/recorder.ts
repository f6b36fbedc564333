import { encodeWav } from './wav.ts';
import workletUrl from './capture-worklet.ts?worker&url';

export const SAMPLE_RATE = 16_000;
export const CHUNK_SAMPLES = 5 * SAMPLE_RATE;
/** The chunk being filled is handed over as a draft each time this much more of it was captured. */
export const DRAFT_SAMPLES = SAMPLE_RATE;

/** Generous: the flush is one message round trip to the worklet, normally a few milliseconds. */
const FLUSH_WAIT_MS = 10_000;

export interface RecorderEvents {
  /** A finished 5 s chunk (the last one may be shorter), as a 16 kHz mono WAV, handed over in order. */
  onChunk(wav: ArrayBuffer): Promise<void>;
  /**
   * The chunk being filled so far (`samples` of it), about every second, in order with the chunks:
   * a draft always reaches the handler before the chunk it grows into. A failure is ignored here
   * (the previous draft stays; the chunk itself is handed over when cut).
   */
  onDraft(wav: ArrayBuffer, samples: number): Promise<void>;
  onLevel(peak: number, recordedSamples: number): void;
  /**
   * A chunk could not be handed over (onChunk threw); the recording is no longer safe. Awaited in
   * order with the chunks, so `stop` returns only after it.
   */
  onError(err: unknown, wav: ArrayBuffer): Promise<void>;
  /** The capture broke by itself (microphone gone, audio processor crashed): stop, and say why. */
  onBroken(reason: string): void;
}

function microphone(): Promise<MediaStream> {
  return navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
  });
}

/**
 * Microphone → AudioWorklet (mono, 16 kHz) → 5-second WAV chunks. Chunks are cut on sample counts,
 * not timers, so no audio falls between two chunks. The sequence numbers are the outbox's to give.
 */
export class MicRecorder {
  private context: AudioContext | null = null;
  private stream: MediaStream | null = null;
  private node: AudioWorkletNode | null = null;
  private buffer = new Int16Array(CHUNK_SAMPLES);
  private filled = 0;
  /** How much of the chunk being filled the last draft held. */
  private drafted = 0;
  /** A draft is queued or being written; another is not queued behind it. */
  private drafting = false;
  private recorded = 0;
  private broken = false;
  /** Chunk hand-offs run one after another, so chunks are stored in order. */
  private handing: Promise<void> = Promise.resolve();
  private finished: (() => void) | null = null;

  /**
   * `source` gives the audio: the microphone by default; L25, a tab's or the screen's audio for
   * a meeting's second track.
   */
  constructor(
    private readonly events: RecorderEvents,
    private readonly source: () => Promise<MediaStream> = microphone,
  ) {}

  async start(): Promise<void> {
    try {
      await this.open();
    } catch (err) {
      await this.release();
      throw err;
    }
  }

  /** Samples captured into the chunk being filled, not handed over as a chunk yet. */
  get unchunkedSamples(): number {
    return this.filled;
  }

  private async open(): Promise<void> {
    this.stream = await this.source();
    for (const track of this.stream.getAudioTracks()) {
      // Unplugged, or permission revoked: the track ends and no more audio comes.
      track.addEventListener('ended', () =>
        this.fail('the microphone stopped (unplugged, or its permission was taken back)'),
      );
    }
    this.context = new AudioContext();
    if (this.context.sampleRate < SAMPLE_RATE) {
      throw new Error(
        `the audio device runs at ${this.context.sampleRate} Hz, below the ${SAMPLE_RATE} Hz speech recognition needs`,
      );
    }
    await this.context.audioWorklet.addModule(workletUrl);
    const source = this.context.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(this.context, 'verbatim-capture', {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      channelCount: 1,
      channelCountMode: 'explicit',
    });
    this.node.onprocessorerror = () => this.fail('the audio processor in this browser stopped with an error');
    this.node.port.onmessage = (e: MessageEvent<{ samples?: Int16Array; peak?: number; done?: boolean }>) => {
      if (e.data.samples) this.take(e.data.samples, e.data.peak ?? 0);
      if (e.data.done) this.finished?.();
    };
    // A silent sink keeps the graph pulling audio through the worklet.
    const mute = this.context.createGain();
    mute.gain.value = 0;
    source.connect(this.node).connect(mute).connect(this.context.destination);
    if (this.context.state === 'suspended') await this.context.resume();
  }

  private fail(reason: string): void {
    if (this.broken) return;
    this.broken = true;
    this.events.onBroken(reason);
  }

  /**
   * Stops the microphone, then hands off everything captured, the last partial chunk included.
   * Resolves false when the worklet did not flush the samples its filter still held (under 0.1 s)
   * in time; what reached the main thread is handed off either way.
   */
  async stop(): Promise<boolean> {
    const node = this.node;
    let flushed = true;
    if (node) {
      // A crashed worklet will not answer; do not wait for it.
      if (!this.broken) {
        const done = new Promise<boolean>((resolve) => (this.finished = () => resolve(true)));
        node.port.postMessage('flush');
        flushed = await Promise.race([
          done,
          new Promise<boolean>((r) => setTimeout(() => r(false), FLUSH_WAIT_MS)),
        ]);
      } else flushed = false;
      node.disconnect();
    }
    await this.release();
    if (this.filled > 0) this.cut();
    await this.handing;
    return flushed;
  }

  private async release(): Promise<void> {
    for (const t of this.stream?.getTracks() ?? []) t.stop();
    const context = this.context;
    this.node = null;
    this.context = null;
    this.stream = null;
    if (context && context.state !== 'closed') await context.close();
  }

  private take(samples: Int16Array, peak: number): void {
    let at = 0;
    while (at < samples.length) {
      const n = Math.min(samples.length - at, CHUNK_SAMPLES - this.filled);
      this.buffer.set(samples.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled === CHUNK_SAMPLES) this.cut();
    }
    this.recorded += samples.length;
    this.events.onLevel(peak, this.recorded);
    if (this.filled - this.drafted >= DRAFT_SAMPLES) this.draft();
  }

  /**
   * Hands over the chunk being filled as a draft, behind every chunk already cut (one chain), so a
   * draft of chunk k can never be stored after chunk k itself. At most one draft waits at a time.
   */
  private draft(): void {
    if (this.drafting || this.broken) return;
    this.drafting = true;
    this.drafted = this.filled;
    const samples = this.filled;
    const wav = encodeWav(this.buffer.subarray(0, samples), SAMPLE_RATE);
    this.handing = this.handing
      .then(() => this.events.onDraft(wav, samples))
      .catch(() => undefined)
      .finally(() => {
        this.drafting = false;
      });
  }

  private cut(): void {
    const wav = encodeWav(this.buffer.subarray(0, this.filled), SAMPLE_RATE);
    this.filled = 0;
    this.drafted = 0;
    this.handing = this.handing
      .then(() => this.events.onChunk(wav))
      .catch((err: unknown) => this.events.onError(err, wav));
  }
}
