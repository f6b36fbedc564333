/**
 * The browser's durable outbox for live audio (IndexedDB). A chunk is written here before any
 * attempt to send it and deleted only when the server has acknowledged it (201, or 200 for a
 * chunk it already had), so a network outage, a closed lid or a reload loses nothing that was
 * captured. See docs/web-app.md.
 *
 * Stores: `chunks` holds pending chunks only (key [meetingId, seq], so keys sort in sequence
 * order); `rejected` keeps what the server refused for good, without the audio; `meetings` the
 * next sequence number and whether End is still to be delivered.
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
}

export interface StoredMeeting {
  meetingId: string;
  nextSeq: number;
  endRequested: boolean;
}

export type ChunkKey = [meetingId: string, seq: number];

const DB_NAME = 'verbatim';
const DB_VERSION = 1;

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
      db.createObjectStore('chunks', { keyPath: ['meetingId', 'seq'] });
      db.createObjectStore('rejected', { keyPath: ['meetingId', 'seq'] });
      db.createObjectStore('meetings', { keyPath: 'meetingId' });
    };
    return new ChunkStore(await request(req));
  }

  /** Stores a captured chunk and advances the meeting's next sequence number, in one transaction. */
  async put(meetingId: string, seq: number, wav: ArrayBuffer): Promise<void> {
    const tx = this.db.transaction(['chunks', 'meetings'], 'readwrite');
    tx.objectStore('chunks').put({ meetingId, seq, wav, createdAt: Date.now() } satisfies StoredChunk);
    const meetings = tx.objectStore('meetings');
    const current = (await request(meetings.get(meetingId))) as StoredMeeting | undefined;
    meetings.put({
      meetingId,
      nextSeq: Math.max(current?.nextSeq ?? 0, seq + 1),
      endRequested: current?.endRequested ?? false,
    } satisfies StoredMeeting);
    await done(tx);
  }

  /** Keys of every pending chunk, each meeting's in sequence order (no audio is read). */
  async pendingKeys(): Promise<ChunkKey[]> {
    const tx = this.db.transaction('chunks', 'readonly');
    return (await request(tx.objectStore('chunks').getAllKeys())) as ChunkKey[];
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

  async reject(key: ChunkKey, error: string): Promise<void> {
    const tx = this.db.transaction(['chunks', 'rejected'], 'readwrite');
    tx.objectStore('chunks').delete(key);
    tx.objectStore('rejected').put({ meetingId: key[0], seq: key[1], error } satisfies RejectedChunk);
    await done(tx);
  }

  async rejected(): Promise<RejectedChunk[]> {
    const tx = this.db.transaction('rejected', 'readonly');
    return (await request(tx.objectStore('rejected').getAll())) as RejectedChunk[];
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
    const store = tx.objectStore('meetings');
    const current = (await request(store.get(meetingId))) as StoredMeeting | undefined;
    store.put({ meetingId, nextSeq: current?.nextSeq ?? 0, endRequested: true } satisfies StoredMeeting);
    await done(tx);
  }

  /** Forgets a meeting once its End was delivered and none of its chunks is pending. */
  async forget(meetingId: string): Promise<void> {
    const tx = this.db.transaction('meetings', 'readwrite');
    tx.objectStore('meetings').delete(meetingId);
    await done(tx);
  }
}
