/**
 * The capture AudioWorklet: mixes the microphone to mono and downsamples it to 16 kHz off the main
 * thread, posting about every 100 ms `{samples: Int16Array, peak}`. On a 'flush' message it posts
 * what the resampler still holds and then `{done: true}`, so the last words reach the last chunk.
 */
import { Downsampler, toInt16 } from './resample.ts';

// The AudioWorkletGlobalScope is not in TypeScript's DOM lib.
declare const sampleRate: number;
declare function registerProcessor(name: string, ctor: new () => AudioWorkletProcessorBase): void;
declare class AudioWorkletProcessorBase {
  readonly port: MessagePort;
}
const Base = (globalThis as unknown as { AudioWorkletProcessor: typeof AudioWorkletProcessorBase })
  .AudioWorkletProcessor;

const TARGET_RATE = 16_000;
const POST_EVERY = 1_600; // 100 ms at 16 kHz

class CaptureProcessor extends Base {
  private readonly resampler = new Downsampler(sampleRate, TARGET_RATE);
  private pending: Float32Array[] = [];
  private pendingLength = 0;
  private peak = 0;
  private stopped = false;

  constructor() {
    super();
    this.port.onmessage = (e: MessageEvent<unknown>) => {
      if (e.data === 'flush' && !this.stopped) {
        this.stopped = true;
        this.push(this.resampler.flush());
        this.post();
        this.port.postMessage({ done: true });
      }
    };
  }

  process(inputs: Float32Array[][]): boolean {
    if (this.stopped) return false;
    const channels = inputs[0] ?? [];
    const first = channels[0];
    if (!first) return true;
    const mono = new Float32Array(first.length);
    for (const ch of channels)
      for (let i = 0; i < mono.length; i++) mono[i]! += (ch[i] ?? 0) / channels.length;
    for (const s of mono) this.peak = Math.max(this.peak, Math.abs(s));
    this.push(this.resampler.process(mono));
    if (this.pendingLength >= POST_EVERY) this.post();
    return true;
  }

  private push(samples: Float32Array): void {
    if (samples.length === 0) return;
    this.pending.push(samples);
    this.pendingLength += samples.length;
  }

  private post(): void {
    const all = new Float32Array(this.pendingLength);
    let at = 0;
    for (const p of this.pending) {
      all.set(p, at);
      at += p.length;
    }
    this.pending = [];
    this.pendingLength = 0;
    const samples = toInt16(all);
    this.port.postMessage({ samples, peak: this.peak }, [samples.buffer]);
    this.peak = 0;
  }
}

registerProcessor('verbatim-capture', CaptureProcessor);
