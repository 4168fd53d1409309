import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import type { MediaRecord } from '../../src/core/message.ts';
import { mountAdminRoutes, type AdminDeps } from '../../src/http/admin-routes.ts';
import { createHttpApp } from '../../src/http/app.ts';
import { JsonlTranscriptStore, type TranscriptEntry } from '../../src/sessions/transcript.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const KEY = 'agent:main:webchat:direct:ann';

/** The dashboard's history shows a user entry's media: `GET /admin/sessions/:key/history` carries `media` as the transcript file kept it. */
describe('session history with media', () => {
  const tmp = useTempDir('switchboard-history-media-');

  it('a user entry\'s media records reach the page, read back from the transcript file', async () => {
    const media: MediaRecord[] = [
      { kind: 'image', name: 'photo.png', mime: 'image/png', size: 900, sha256: 'a'.repeat(64), modelSha256: 'b'.repeat(64), modelMime: 'image/jpeg', as: 'image', line: '[image: image/png 24×16, 1 KB]' },
      { kind: 'document', name: 'notes.pdf', mime: 'application/pdf', size: 2048, sha256: 'c'.repeat(64), as: 'text', line: '[file: notes.pdf, application/pdf, 2 KB]' },
    ];
    const user = { type: 'message', id: 'u1', role: 'user', content: 'look', at: '2026-12-01T10:00:00.000Z', media } as unknown as TranscriptEntry;
    const writer = new JsonlTranscriptStore({ dir: tmp.dir, logger: silentLogger() });
    await writer.append('s1', user);
    await writer.close();
    // A fresh store: what the page gets is what the file holds, not a cached object.
    const transcripts = new JsonlTranscriptStore({ dir: tmp.dir, logger: silentLogger() });
    const entry = { key: KEY, sessionId: 's1', messageCount: 1 };
    const sessions = { get: async () => entry, peek: () => undefined } as unknown as AdminDeps['sessions'];
    const app = createHttpApp({
      authToken: 't', maxBodyBytes: 1024, logger: silentLogger(), channelRoutes: [],
      mounts: [mountAdminRoutes({ store: {} as AdminDeps['store'], sessions, transcripts, resetSession: async () => undefined })],
    });
    const response = await app.request(`/admin/sessions/${encodeURIComponent(KEY)}/history`, { headers: { authorization: 'Bearer t' } });
    expect(response.status).toBe(200);
    const { entries } = (await response.json()) as { entries: { media?: MediaRecord[] }[] };
    expect(entries[0]!.media).toEqual(media);
    await transcripts.close();
  });
});
