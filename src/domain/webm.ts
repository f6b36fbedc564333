/**
 * Just enough Matroska/WebM to decode a live stream that arrives cut into chunks at arbitrary byte
 * offsets (a browser's MediaRecorder with a timeslice). Only the first chunk carries the stream's
 * header; later chunks are the middle of a stream and may start or end inside a block. So the
 * stream is read as one: the header is kept once, each chunk's bytes are appended to whatever the
 * previous chunk left unfinished, and the whole blocks that complete in a chunk are re-wrapped behind
 * the header into a small stream of their own that ffmpeg decodes.
 */

const ID = {
  ebml: 0x1a45dfa3,
  segment: 0x18538067,
  info: 0x1549a966,
  tracks: 0x1654ae6b,
  cluster: 0x1f43b675,
  timecode: 0xe7,
  simpleBlock: 0xa3,
  blockGroup: 0xa0,
} as const;

const CLUSTER_ID_BYTES = Buffer.from([0x1f, 0x43, 0xb6, 0x75]);
/** No audio block comes near this; more unfinished bytes than this means the stream is not audio. */
const MAX_CARRY_BYTES = 4 * 1024 * 1024;
const UNKNOWN_SIZE = Buffer.from([0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

/** One block (SimpleBlock or BlockGroup element, bytes as received) and its cluster's timecode. */
export interface WebmBlock {
  clusterTime: number;
  element: Buffer;
}

/** Where the reader stands after a chunk: bytes of an unfinished element and the current cluster. */
export interface WebmReadState {
  carry: Buffer;
  clusterTime: number;
}

export class WebmFormatError extends Error {}

interface ElementHeader {
  id: number;
  /** null when the size is "unknown" (live streams: Segment and Cluster). */
  size: number | null;
  headerLength: number;
}

/** Reads an element header at `at`, or returns null when the buffer ends inside it. */
function readHeader(buf: Buffer, at: number): ElementHeader | null {
  if (at >= buf.length) return null;
  const first = buf[at]!;
  const idLength = Math.clz32(first) - 23;
  if (idLength < 1 || idLength > 4) throw new WebmFormatError(`bad element id at byte ${at}`);
  if (at + idLength >= buf.length) return null;
  let id = 0;
  for (let i = 0; i < idLength; i++) id = id * 256 + buf[at + i]!;
  const sizeAt = at + idLength;
  const sizeFirst = buf[sizeAt]!;
  const sizeLength = Math.clz32(sizeFirst) - 23;
  if (sizeLength < 1 || sizeLength > 8) throw new WebmFormatError(`bad element size at byte ${sizeAt}`);
  if (sizeAt + sizeLength > buf.length) return null;
  let size = sizeFirst & (0xff >> sizeLength);
  let allOnes = size === 0xff >> sizeLength;
  for (let i = 1; i < sizeLength; i++) {
    const byte = buf[sizeAt + i]!;
    size = size * 256 + byte;
    allOnes &&= byte === 0xff;
  }
  return { id, size: allOnes ? null : size, headerLength: idLength + sizeLength };
}

function readUint(buf: Buffer): number {
  let value = 0;
  for (const byte of buf) value = value * 256 + byte;
  return value;
}

function encodeSize(size: number): Buffer {
  const out = Buffer.alloc(8);
  out[0] = 0x01;
  out.writeUIntBE(size, 2, 6);
  return out;
}

function encodeUint(value: number): Buffer {
  const bytes: number[] = [];
  let v = value;
  do {
    bytes.unshift(v % 256);
    v = Math.floor(v / 256);
  } while (v > 0);
  return Buffer.from(bytes);
}

function element(idBytes: number[], body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(idBytes), encodeSize(body.length), body]);
}

/** True when the bytes begin with an EBML header, as a WebM stream's first chunk does. */
export function startsWebmStream(data: Buffer): boolean {
  return data.length >= 4 && data.readUInt32BE(0) === ID.ebml;
}

/**
 * Reads the stream header from the first chunk: the EBML header, then a Segment of unknown size
 * holding only the Info and Tracks elements (a SeekHead or Cues would point at offsets of a file we
 * never have). Returns the header and the state to read the rest of the first chunk from.
 */
export function readStreamHeader(data: Buffer): { header: Buffer; rest: Buffer } {
  if (!startsWebmStream(data)) {
    throw new WebmFormatError('the first chunk of a WebM stream must begin with its EBML header');
  }
  const ebml = readHeader(data, 0);
  if (!ebml || ebml.size === null || ebml.headerLength + ebml.size > data.length) {
    throw new WebmFormatError('the EBML header is incomplete');
  }
  let at = ebml.headerLength + ebml.size;
  const segment = readHeader(data, at);
  if (!segment || segment.id !== ID.segment) throw new WebmFormatError('no Segment after the EBML header');
  at += segment.headerLength;
  const kept: Buffer[] = [
    data.subarray(0, ebml.headerLength + ebml.size),
    Buffer.from([0x18, 0x53, 0x80, 0x67]),
    UNKNOWN_SIZE,
  ];
  let sawTracks = false;
  for (;;) {
    const h = readHeader(data, at);
    if (!h) break;
    if (h.id === ID.cluster) break;
    if (h.size === null || at + h.headerLength + h.size > data.length) {
      throw new WebmFormatError('the stream header does not fit in the first chunk');
    }
    if (h.id === ID.info || h.id === ID.tracks) kept.push(data.subarray(at, at + h.headerLength + h.size));
    sawTracks ||= h.id === ID.tracks;
    at += h.headerLength + h.size;
  }
  if (!sawTracks) throw new WebmFormatError('the first chunk has no Tracks element');
  return { header: Buffer.concat(kept), rest: data.subarray(at) };
}

/**
 * Appends one chunk's bytes to the stream read so far and returns the blocks completed in it, with
 * the state to continue from. With `resync` (the chunk before this one never arrived) the reader
 * skips to the first Cluster in the chunk; the bytes before it belong to blocks whose start is lost.
 */
export function readChunk(
  state: WebmReadState | null,
  data: Buffer,
): { blocks: WebmBlock[]; state: WebmReadState | null; skippedBytes: number } {
  let buf: Buffer;
  let clusterTime: number;
  let skippedBytes = 0;
  if (state) {
    buf = state.carry.length > 0 ? Buffer.concat([state.carry, data]) : data;
    clusterTime = state.clusterTime;
  } else {
    const found = data.indexOf(CLUSTER_ID_BYTES);
    skippedBytes = found < 0 ? data.length : found;
    if (found < 0) return { blocks: [], state: null, skippedBytes };
    buf = data.subarray(found);
    clusterTime = 0;
  }
  const blocks: WebmBlock[] = [];
  let at = 0;
  for (;;) {
    const h = readHeader(buf, at);
    if (!h) break;
    if (h.id === ID.cluster || h.id === ID.segment) {
      // Entered, not skipped: their children follow as if at this level.
      at += h.headerLength;
      continue;
    }
    if (h.size === null) throw new WebmFormatError(`element 0x${h.id.toString(16)} has unknown size`);
    const end = at + h.headerLength + h.size;
    if (end > buf.length) break;
    if (h.id === ID.timecode) {
      clusterTime = readUint(buf.subarray(at + h.headerLength, end));
    } else if (h.id === ID.simpleBlock || h.id === ID.blockGroup) {
      blocks.push({ clusterTime, element: Buffer.from(buf.subarray(at, end)) });
    }
    at = end;
  }
  if (buf.length - at > MAX_CARRY_BYTES) {
    throw new WebmFormatError(`an element is larger than ${MAX_CARRY_BYTES} bytes`);
  }
  return { blocks, state: { carry: Buffer.from(buf.subarray(at)), clusterTime }, skippedBytes };
}

/** A decodable stream: the header, then the blocks in clusters carrying their original timecodes. */
export function buildStream(header: Buffer, blocks: WebmBlock[]): Buffer {
  const parts: Buffer[] = [header];
  let i = 0;
  while (i < blocks.length) {
    const time = blocks[i]!.clusterTime;
    const body: Buffer[] = [element([0xe7], encodeUint(time))];
    for (; i < blocks.length && blocks[i]!.clusterTime === time; i++) body.push(blocks[i]!.element);
    parts.push(element([0x1f, 0x43, 0xb6, 0x75], Buffer.concat(body)));
  }
  return Buffer.concat(parts);
}

/** Reader state as JSON for the database. */
export function encodeReadState(state: WebmReadState | null): string | null {
  return state
    ? JSON.stringify({ carry: state.carry.toString('base64'), clusterTime: state.clusterTime })
    : null;
}

export function decodeReadState(json: unknown): WebmReadState | null {
  if (!json || typeof json !== 'object') return null;
  const value = json as { carry?: unknown; clusterTime?: unknown };
  if (typeof value.carry !== 'string' || typeof value.clusterTime !== 'number') return null;
  return { carry: Buffer.from(value.carry, 'base64'), clusterTime: value.clusterTime };
}
