/**
 * The browser's durable outbox for live audio (IndexedDB). A chunk is written here before any
 * attempt to send it and deleted only when the server has acknowledged it (201, or 200 for a
 * chunk it already had), so a network outage, a closed lid or a reload loses nothing that was
 * captured. See docs/web-app.md.
 *
 * Stores: `chunks` holds pending chunks only (key [meetingId, seq], so keys sort in sequence
 * order); `rejected` keeps what the server refused for good, with its audio (it can be downloaded);
 * `meetings` the next sequence number and whether End is still to be delivered.
 *
 * Sequence numbers are allocated inside the transaction that stores the chunk, and chunks are
 * written with `add`, never `put`: two writers can never give two chunks one seq, or overwrite one.
 *
 * `drafts` holds, per meeting, the chunk still being filled (rewritten about every second while
 * recording), under the seq it will get: the meeting's next one, which only the tab holding the
 * meeting's recording lock advances. Storing the real chunk deletes the draft in the same
 * transaction; a draft whose tab is gone is promoted to a pending chunk (`promoteDraft`), only by a
 * holder of that lock, so a draft is never sent while its tab records it.
 */

export interface StoredChunk {
  meetingId: string;
  seq: number;
  wav: ArrayBuffer;
  createdAt: number;
}

export interface RejectedChunk {
  meetingId: string;
  seq: number;
  error: string;
  /** The audio, kept so it can be downloaded (absent in entries an older version stored). */
  wav?: ArrayBuffer;
  rejectedAt?: number;
}

/** The chunk being filled, as far as it was captured; never sent as is (see `promoteDraft`). */
export interface DraftChunk {
  meetingId: string;
  /** The meeting's next sequence number when the draft was written: the seq the chunk will get. */
  seq: number;
  wav: ArrayBuffer;
  samples: number;
  updatedAt: number;
}

/** What `promoteDraft` did with a meeting's draft. */
export type DraftPromotion =
  | { kind: 'none' }
  | { kind: 'empty' }
  | { kind: 'pending'; seq: number }
  | { kind: 'misplaced'; seq: number };

export interface StoredMeeting {
  meetingId: string;
  nextSeq: number;
  endRequested: boolean;
  /**
   * L25: the samples of every chunk stored here so far (0…nextSeq−1), where this meeting's timeline
   * stands: a second track started now starts there. Absent in records an older version wrote.
   */
  samples?: number;
}

/** A 16 kHz mono WAV's samples (its canonical 44-byte header off). */
const samplesOf = (wav: ArrayBuffer) => Math.max(0, (wav.byteLength - 44) / 2);

export type ChunkKey = [meetingId: string, seq: number];

const DB_NAME = 'verbatim';
const DB_VERSION = 2;

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error('IndexedDB request failed'));
  });
}

function done(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
    tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'));
  });
}

export class ChunkStore {
  private constructor(private readonly db: IDBDatabase) {}

  static async open(): Promise<ChunkStore> {
    const req = indexedDB.open(DB_NAME, DB_VERSION);
    req.onupgradeneeded = () => {
      const db = req.result;
      // Version 1 had the first three stores; an outbox kept from then is upgraded in place.
      const has = (name: string) => db.objectStoreNames.contains(name);
      if (!has('chunks')) db.createObjectStore('chunks', { keyPath: ['meetingId', 'seq'] });
      if (!has('rejected')) db.createObjectStore('rejected', { keyPath: ['meetingId', 'seq'] });
      if (!has('meetings')) db.createObjectStore('meetings', { keyPath: 'meetingId' });
      if (!has('drafts')) db.createObjectStore('drafts', { keyPath: 'meetingId' });
    };
    return new ChunkStore(await request(req));
  }

  /**
   * Stores a captured chunk under the meeting's next sequence number and advances it, and deletes
   * the meeting's draft (the chunk replaces it), in one transaction; returns the seq. `add` fails
   * rather than overwrite an existing chunk.
   */
  async add(meetingId: string, wav: ArrayBuffer): Promise<number> {
    const tx = this.db.transaction(['chunks', 'meetings', 'drafts'], 'readwrite');
    const completed = done(tx);
    completed.catch(() => undefined); // awaited below; this only keeps an early throw from leaving it unhandled
    const meetings = tx.objectStore('meetings');
    const current = (await request(meetings.get(meetingId))) as StoredMeeting | undefined;
    const seq = current?.nextSeq ?? 0;
    tx.objectStore('chunks').add({ meetingId, seq, wav, createdAt: Date.now() } satisfies StoredChunk);
    meetings.put({
      meetingId,
      nextSeq: seq + 1,
      endRequested: current?.endRequested ?? false,
      samples: (current?.samples ?? 0) + samplesOf(wav),
    } satisfies StoredMeeting);
    tx.objectStore('drafts').delete(meetingId);
    await completed;
    return seq;
  }

  /**
   * Writes (over the previous one) the draft of the chunk being filled, under the meeting's next
   * sequence number, read in the same transaction. Only the tab holding the meeting's recording
   * lock calls this, so that number does not move until its own `add` replaces the draft.
   */
  async saveDraft(meetingId: string, wav: ArrayBuffer, samples: number): Promise<void> {
    const tx = this.db.transaction(['meetings', 'drafts'], 'readwrite');
    const completed = done(tx);
    completed.catch(() => undefined); // awaited below; this only keeps an early throw from leaving it unhandled
    const current = (await request(tx.objectStore('meetings').get(meetingId))) as StoredMeeting | undefined;
    tx.objectStore('drafts').put({
      meetingId,
      seq: current?.nextSeq ?? 0,
      wav,
      samples,
      updatedAt: Date.now(),
    } satisfies DraftChunk);
    await completed;
  }

  async deleteDraft(meetingId: string): Promise<void> {
    const tx = this.db.transaction('drafts', 'readwrite');
    tx.objectStore('drafts').delete(meetingId);
    await done(tx);
  }

  /** Meetings that have a draft (no audio is read). */
  async draftMeetings(): Promise<string[]> {
    const tx = this.db.transaction('drafts', 'readonly');
    return (await request(tx.objectStore('drafts').getAllKeys())) as string[];
  }

  /**
   * Turns a meeting's draft, left by a tab that is gone, into a pending chunk under its seq (which
   * is then advanced), in one transaction. The caller must hold the meeting's recording lock: a
   * draft is never promoted while a tab still records it. A draft whose seq is not the meeting's
   * next one cannot be placed on the timeline; it is kept as rejected, with its audio, rather than
   * sent under a number another chunk has or had.
   */
  async promoteDraft(meetingId: string): Promise<DraftPromotion> {
    const tx = this.db.transaction(['chunks', 'meetings', 'drafts', 'rejected'], 'readwrite');
    const completed = done(tx);
    completed.catch(() => undefined); // awaited below; this only keeps an early throw from leaving it unhandled
    const draft = (await request(tx.objectStore('drafts').get(meetingId))) as DraftChunk | undefined;
    if (!draft) {
      await completed;
      return { kind: 'none' };
    }
    const drafts = tx.objectStore('drafts');
    if (draft.samples === 0) {
      drafts.delete(meetingId);
      await completed;
      return { kind: 'empty' };
    }
    const meetings = tx.objectStore('meetings');
    const current = (await request(meetings.get(meetingId))) as StoredMeeting | undefined;
    const seq = current?.nextSeq ?? 0;
    if (draft.seq !== seq) {
      // Cannot happen while only the lock holder writes drafts and `add` deletes them; if it does,
      // keep the audio (downloadable) instead of sending it under a number another chunk has or had.
      const rejected = tx.objectStore('rejected');
      if ((await request(rejected.getKey([meetingId, draft.seq]))) === undefined) {
        rejected.add({
          meetingId,
          seq: draft.seq,
          error: `draft.misplaced: the unfinished chunk ${draft.seq} was found when the next chunk was ${seq}`,
          wav: draft.wav,
          rejectedAt: Date.now(),
        } satisfies RejectedChunk);
        drafts.delete(meetingId);
      }
      await completed;
      return { kind: 'misplaced', seq: draft.seq };
    }
    drafts.delete(meetingId);
    tx.objectStore('chunks').add({
      meetingId,
      seq,
      wav: draft.wav,
      createdAt: Date.now(),
    } satisfies StoredChunk);
    meetings.put({
      meetingId,
      nextSeq: seq + 1,
      endRequested: current?.endRequested ?? false,
      samples: (current?.samples ?? 0) + samplesOf(draft.wav),
    } satisfies StoredMeeting);
    await completed;
    return { kind: 'pending', seq };
  }

  /** Keys of every pending chunk, each meeting's in sequence order (no audio is read). */
  async pendingKeys(): Promise<ChunkKey[]> {
    const tx = this.db.transaction('chunks', 'readonly');
    return (await request(tx.objectStore('chunks').getAllKeys())) as ChunkKey[];
  }

  /** One meeting's pending sequence numbers, in order, read now (no audio is read). */
  async pendingSeqs(meetingId: string): Promise<number[]> {
    const tx = this.db.transaction('chunks', 'readonly');
    const range = IDBKeyRange.bound([meetingId, -Infinity], [meetingId, Infinity]);
    const keys = (await request(tx.objectStore('chunks').getAllKeys(range))) as ChunkKey[];
    return keys.map(([, seq]) => seq);
  }

  /** Every chunk of audio kept for one meeting, pending or refused, in sequence order (a download). */
  async keptAudio(meetingId: string): Promise<ArrayBuffer[]> {
    const tx = this.db.transaction(['chunks', 'rejected'], 'readonly');
    const range = IDBKeyRange.bound([meetingId, -Infinity], [meetingId, Infinity]);
    const pending = (await request(tx.objectStore('chunks').getAll(range))) as StoredChunk[];
    const refused = (await request(tx.objectStore('rejected').getAll(range))) as RejectedChunk[];
    return [...pending, ...refused].sort((x, y) => x.seq - y.seq).flatMap((c) => (c.wav ? [c.wav] : []));
  }

  async get(key: ChunkKey): Promise<StoredChunk | undefined> {
    const tx = this.db.transaction('chunks', 'readonly');
    return (await request(tx.objectStore('chunks').get(key))) as StoredChunk | undefined;
  }

  async acknowledge(key: ChunkKey): Promise<void> {
    const tx = this.db.transaction('chunks', 'readwrite');
    tx.objectStore('chunks').delete(key);
    await done(tx);
  }

  /** Moves a chunk the server refused for good, with its audio, from `chunks` to `rejected`. */
  async reject(key: ChunkKey, error: string): Promise<void> {
    const tx = this.db.transaction(['chunks', 'rejected'], 'readwrite');
    const completed = done(tx);
    completed.catch(() => undefined); // awaited below; this only keeps an early throw from leaving it unhandled
    const chunk = (await request(tx.objectStore('chunks').get(key))) as StoredChunk | undefined;
    tx.objectStore('rejected').put({
      meetingId: key[0],
      seq: key[1],
      error,
      wav: chunk?.wav,
      rejectedAt: Date.now(),
    } satisfies RejectedChunk);
    tx.objectStore('chunks').delete(key);
    await completed;
  }

  /** Every rejected chunk, its audio left out (`rejectedAudio` reads one). */
  async rejected(): Promise<Array<Omit<RejectedChunk, 'wav'> & { hasAudio: boolean }>> {
    const tx = this.db.transaction('rejected', 'readonly');
    const all = (await request(tx.objectStore('rejected').getAll())) as RejectedChunk[];
    return all.map(({ wav, ...r }) => ({ ...r, hasAudio: wav !== undefined }));
  }

  async rejectedAudio(key: ChunkKey): Promise<ArrayBuffer | undefined> {
    const tx = this.db.transaction('rejected', 'readonly');
    return ((await request(tx.objectStore('rejected').get(key))) as RejectedChunk | undefined)?.wav;
  }

  async meeting(meetingId: string): Promise<StoredMeeting | undefined> {
    const tx = this.db.transaction('meetings', 'readonly');
    return (await request(tx.objectStore('meetings').get(meetingId))) as StoredMeeting | undefined;
  }

  async meetings(): Promise<StoredMeeting[]> {
    const tx = this.db.transaction('meetings', 'readonly');
    return (await request(tx.objectStore('meetings').getAll())) as StoredMeeting[];
  }

  async requestEnd(meetingId: string): Promise<void> {
    const tx = this.db.transaction('meetings', 'readwrite');
    const completed = done(tx);
    completed.catch(() => undefined); // awaited below; this only keeps an early throw from leaving it unhandled
    const store = tx.objectStore('meetings');
    const current = (await request(store.get(meetingId))) as StoredMeeting | undefined;
    store.put({
      meetingId,
      nextSeq: current?.nextSeq ?? 0,
      endRequested: true,
      ...(current?.samples !== undefined ? { samples: current.samples } : {}),
    } satisfies StoredMeeting);
    await completed;
  }

  /**
   * Drops everything this browser keeps for a meeting (pending and refused chunks, the End): only
   * on the person's say-so, for a meeting deleted on the server, after its audio was offered.
   */
  async discard(meetingId: string): Promise<void> {
    const tx = this.db.transaction(['chunks', 'rejected', 'meetings', 'drafts'], 'readwrite');
    const range = IDBKeyRange.bound([meetingId, -Infinity], [meetingId, Infinity]);
    tx.objectStore('chunks').delete(range);
    tx.objectStore('rejected').delete(range);
    tx.objectStore('meetings').delete(meetingId);
    tx.objectStore('drafts').delete(meetingId);
    await done(tx);
  }

  /** Forgets a meeting once its End was delivered and none of its chunks is pending. */
  async forget(meetingId: string): Promise<void> {
    const tx = this.db.transaction('meetings', 'readwrite');
    tx.objectStore('meetings').delete(meetingId);
    await done(tx);
  }
}
