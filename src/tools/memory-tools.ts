import { z } from 'zod';
import { appendMemoryNote, searchMemoryNotes } from './memory-notes.ts';
import { defineTool, type Tool } from './tool.ts';

/** `memory_write` and `memory_search` (SPEC §11, `group:memory`). */
export function memoryTools(): Tool[] {
  return [
    defineTool({
      name: 'memory_write',
      group: 'group:memory',
      description: 'Append a durable note (facts, decisions, preferences, open tasks) to today\'s memory file. Notes outlive this conversation.',
      schema: z.object({ note: z.string().trim().min(1).max(20_000).describe('the note, in Markdown') }),
      async run({ note }, ctx) {
        const file = await appendMemoryNote(ctx.workspace, note, {
          now: ctx.now(), timeZone: ctx.timezone, sessionKey: ctx.entry.key, ...(ctx.purpose === 'memory-flush' ? { tag: 'before compaction' } : {}),
        });
        return { status: 'ok', file: file.slice(ctx.workspace.length + 1).split('\\').join('/') };
      },
    }),
    defineTool({
      name: 'memory_search',
      group: 'group:memory',
      description: 'Find notes in the memory files by words (all words must match), newest first.',
      schema: z.object({
        query: z.string().trim().min(1).max(500).describe('words to look for'),
        limit: z.number().int().min(1).max(20).default(5),
      }),
      async run({ query, limit }, ctx) {
        const hits = await searchMemoryNotes(ctx.workspace, query, limit);
        return hits.length ? { status: 'ok', notes: hits } : { status: 'ok', notes: [], note: `No note matches "${query}".` };
      },
    }),
  ];
}
