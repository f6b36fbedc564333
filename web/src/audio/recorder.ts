import { encodeWav } from './wav.ts';
import workletUrl from './capture-worklet.ts?worker&url';

export const SAMPLE_RATE = 16_000;
export const CHUNK_SAMPLES = 5 * SAMPLE_RATE;

export interface RecorderEvents {
  /** A finished 5 s chunk (the last one may be shorter), as a 16 kHz mono WAV. */
  onChunk(seq: number, wav: ArrayBuffer): Promise<void>;
  onLevel(peak: number, recordedSamples: number): void;
  /** A chunk could not be kept (IndexedDB full or gone): the recording is no longer safe. */
  onError(err: unknown): void;
}

/**
 * Microphone → AudioWorklet (mono, 16 kHz) → 5-second WAV chunks numbered from `firstSeq`. Chunks
 * are cut on sample counts, not timers, so no audio falls between two chunks.
 */
export class MicRecorder {
  private context: AudioContext | null = null;
  private stream: MediaStream | null = null;
  private node: AudioWorkletNode | null = null;
  private buffer = new Int16Array(CHUNK_SAMPLES);
  private filled = 0;
  private seq: number;
  private recorded = 0;
  /** Chunk hand-offs run one after another, so chunks are stored in order. */
  private handing: Promise<void> = Promise.resolve();
  private finished: (() => void) | null = null;

  constructor(
    firstSeq: number,
    private readonly events: RecorderEvents,
  ) {
    this.seq = firstSeq;
  }

  get nextSeq(): number {
    return this.seq;
  }

  async start(): Promise<void> {
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    this.context = new AudioContext();
    await this.context.audioWorklet.addModule(workletUrl);
    const source = this.context.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(this.context, 'verbatim-capture', {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      channelCount: 1,
      channelCountMode: 'explicit',
    });
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

  /** Stops the microphone, then hands off everything captured, the last partial chunk included. */
  async stop(): Promise<void> {
    const node = this.node;
    if (node) {
      const done = new Promise<void>((resolve) => (this.finished = resolve));
      node.port.postMessage('flush');
      await Promise.race([done, new Promise((r) => setTimeout(r, 2000))]);
      node.disconnect();
    }
    for (const t of this.stream?.getTracks() ?? []) t.stop();
    await this.context?.close();
    if (this.filled > 0) this.cut();
    await this.handing;
    this.node = null;
    this.context = null;
    this.stream = null;
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
  }

  private cut(): void {
    const wav = encodeWav(this.buffer.subarray(0, this.filled), SAMPLE_RATE);
    const seq = this.seq++;
    this.filled = 0;
    this.handing = this.handing
      .then(() => this.events.onChunk(seq, wav))
      .catch((err) => this.events.onError(err));
  }
}
