import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FfmpegAudioDecoder } from '../src/adapters/ffmpeg-audio-decoder.ts';
import {
  buildStream,
  readChunk,
  readStreamHeader,
  startsWebmStream,
  WebmFormatError,
  type WebmBlock,
  type WebmReadState,
} from '../src/domain/webm.ts';
import { SPEECH, speechWav, webmOpus } from './support/harness.ts';

/** Pieces of `size` bytes; the first holds the stream header whole, as a browser's first chunk does. */
function cut(data: Buffer, size: number): Buffer[] {
  const first = Math.max(size, 1000);
  const out: Buffer[] = [data.subarray(0, first)];
  for (let i = first; i < data.length; i += size) out.push(data.subarray(i, i + size));
  return out;
}

/** Reads a stream piece by piece, as the live chunk path does. */
function readPieces(pieces: Buffer[]): { header: Buffer; blocks: WebmBlock[] } {
  const { header, rest } = readStreamHeader(pieces[0]!);
  let state: WebmReadState | null = { carry: Buffer.alloc(0), clusterTime: 0 };
  const blocks: WebmBlock[] = [];
  for (const [i, piece] of pieces.entries()) {
    const r = readChunk(state, i === 0 ? rest : piece);
    blocks.push(...r.blocks);
    state = r.state;
  }
  assert.equal(state?.carry.length, 0, 'nothing is left unread at the end of the stream');
  return { header, blocks };
}

void describe('WebM stream reading', () => {
  const stream = webmOpus(speechWav(SPEECH));

  void it('L1: a stream cut at arbitrary byte offsets yields the same blocks as read whole', () => {
    const whole = readPieces([stream]);
    assert.ok(whole.blocks.length > 100, `only ${whole.blocks.length} blocks`);
    for (const size of [97, 1000, 4099, 20_000]) {
      const pieces = readPieces(cut(stream, size));
      assert.equal(pieces.blocks.length, whole.blocks.length, `cut every ${size} bytes`);
      assert.ok(pieces.blocks.every((b, i) => b.element.equals(whole.blocks[i]!.element)));
      assert.ok(pieces.blocks.every((b, i) => b.clusterTime === whole.blocks[i]!.clusterTime));
    }
  });

  void it('L1: the re-wrapped blocks decode to exactly the audio of the original stream', async () => {
    const decoder = new FfmpegAudioDecoder();
    const original = await decoder.decode(stream);
    const { header, blocks } = readPieces(cut(stream, 4099));
    const rebuilt = await decoder.decode(buildStream(header, blocks));
    assert.equal(rebuilt.samples.length, original.samples.length);
    assert.deepEqual(rebuilt.samples, original.samples);
  });

  void it('S2: a first chunk without the stream header is refused; a resync skips to the next cluster', () => {
    assert.equal(startsWebmStream(stream), true);
    assert.equal(startsWebmStream(stream.subarray(100)), false);
    assert.throws(() => readStreamHeader(stream.subarray(100)), WebmFormatError);
    assert.throws(() => readStreamHeader(stream.subarray(0, 60)), WebmFormatError);

    const pieces = cut(stream, 4099);
    const resynced = readChunk(null, pieces[3]!);
    assert.ok(resynced.skippedBytes > 0 && resynced.skippedBytes < pieces[3]!.length);
    const clusterId = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);
    assert.ok(pieces[3]!.subarray(resynced.skippedBytes).subarray(0, 4).equals(clusterId));
    const noCluster = readChunk(null, Buffer.alloc(300, 0x42));
    assert.equal(noCluster.state, null);
    assert.equal(noCluster.skippedBytes, 300);
  });
});
