import type { SessionEntry } from './entry.ts';
import type { SessionManager } from './manager.ts';
import type { SessionStore } from './store.ts';

/** Every stored session in key order, the live entry where the session is active; read a page at a time. */
export async function* allSessions(store: SessionStore, sessions?: SessionManager): AsyncGenerator<SessionEntry> {
  let cursor: string | undefined;
  do {
    const page = await store.list({ limit: 1000, cursor });
    for (const stored of page.entries) yield sessions?.peek(stored.key)?.entry ?? stored;
    cursor = page.nextCursor;
  } while (cursor);
}
