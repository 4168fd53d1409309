/** A stored file of the media store: content-addressed by the SHA-256 of its bytes (SPEC §15). */
export interface StoredMedia {
  /** Lowercase hex SHA-256 of the bytes; the file's name in the store. */
  sha256: string;
  size: number;
  /** The content type it was stored with (sniffed from the bytes where they tell, else the platform's). */
  mime: string;
  /** Epoch ms when it was first stored (or last stored again: storing the same bytes refreshes it). */
  storedAt: number;
}

/**
 * Where fetched and uploaded media is kept (SPEC §15): one machine `stateDir/media/<sha256>`
 * ({@link FileMediaStore}), cluster mode a PostgreSQL table (`src/cluster/pg-media-store.ts`), so any replica
 * rebuilds a session's context with its images. `src/main.ts` builds one and passes it in.
 */
export interface MediaStore {
  /**
   * Streams `body` into the store, hashing as it goes; never holds more than one chunk on the event loop
   * (the PostgreSQL store buffers up to `maxBytes`). Rejects with `MediaFetchError('too_large')` as soon as the
   * bytes pass `maxBytes` (nothing is kept), with the signal's reason when aborted. Storing bytes already there
   * keeps one copy and refreshes its time.
   */
  put(body: AsyncIterable<Uint8Array> | Uint8Array, options: { mime: string; maxBytes: number; signal?: AbortSignal; now?: number }): Promise<StoredMedia>;
  /** The bytes of a stored file; undefined when it is not (or no longer) there. */
  get(sha256: string): Promise<Buffer | undefined>;
  /** A stored file's facts, without its bytes. */
  stat(sha256: string): Promise<StoredMedia | undefined>;
  /**
   * Deletes files older than `retentionMs`, then the oldest until the store holds at most `maxBytes`.
   * Returns what went. Start-up never waits on it.
   */
  sweep(options: { now: number; retentionMs: number; maxBytes: number }): Promise<{ removed: number; bytes: number }>;
  /** Releases what the store holds open. */
  close?(): Promise<void>;
}
