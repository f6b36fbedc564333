import { ChunkSender } from './chunk-sender.ts';
import { ChunkStore } from './chunk-store.ts';

export interface Outbox {
  store: ChunkStore;
  sender: ChunkSender;
}

let opened: Promise<Outbox> | null = null;

/** One outbox per page; opening it starts a round, which flushes what a previous page left. */
export function outbox(): Promise<Outbox> {
  opened ??= ChunkStore.open().then((store) => {
    const sender = new ChunkSender(store);
    sender.kick();
    return { store, sender };
  });
  return opened;
}
