export { localDate, localTime, memoryFileOf } from '../../tools/memory-notes.ts';

/** The tool the flush offers; nothing else is callable during it. */
export const MEMORY_WRITE = 'memory_write';

/** Tool rounds a flush may take before the compaction goes on without it. */
export const MAX_FLUSH_ROUNDS = 4;

/** The silent request added to the conversation before a compaction. */
export function memoryFlushPrompt(relativeFile: string): string {
  return [
    '[Pre-compaction memory flush] This conversation is about to be compacted: older messages will be replaced by a summary.',
    `Save what is worth remembering beyond this conversation (facts about the user, decisions, preferences, commitments, open tasks, exact identifiers) by calling ${MEMORY_WRITE} with short Markdown bullet points; they are appended to ${relativeFile} in your workspace.`,
    `Call nothing when there is nothing new worth keeping. This message and your reply are not shown to the user.`,
  ].join(' ');
}
