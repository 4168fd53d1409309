import type { TranscriptEntry, TranscriptMessage } from '../../sessions/transcript.ts';

/**
 * Share of the context window the summary blocks may take together. A compaction appends a block while the
 * blocks already there take at most this much; past it, the compaction merges them and its own part into one
 * block (a rewrite, the only time the system message changes before its end). 20% of a 128k window is about
 * 25k tokens of summaries, many compactions' worth, and still leaves most of the window to the conversation.
 */
export const SUMMARY_BLOCKS_MAX_SHARE = 0.2;

/** The part of a transcript a request is built from. */
export interface ActiveHistory {
  /** The summary blocks of the compactions in force, oldest first (empty before the first compaction). */
  blocks: string[];
  /** The blocks joined by blank lines (undefined without any). */
  summary?: string;
  /** The messages from the last compaction's first kept message on. */
  kept: TranscriptMessage[];
  /** Index of the last compaction entry in the history, -1 without one. */
  compactionIndex: number;
}

/**
 * The summary blocks and the messages kept after the last compaction. The blocks are the summaries of the
 * compactions back to the last one that was not appended (a merge, or an entry of the time before blocks,
 * whose summary is cumulative): each appended block covers the messages between the previous compaction's
 * first kept message and its own.
 */
export function activeHistory(history: readonly TranscriptEntry[]): ActiveHistory {
  const blocks: string[] = [];
  let start = 0;
  let compactionIndex = -1;
  for (let i = history.length - 1; i >= 0; i--) {
    const e = history[i] as TranscriptEntry;
    if (e.type !== 'compaction') continue;
    if (compactionIndex < 0) {
      compactionIndex = i;
      const first = history.findIndex((x) => x.type === 'message' && x.id === e.firstKeptId);
      start = first >= 0 ? first : i + 1;
    }
    blocks.unshift(e.summary);
    if (!e.appended) break;
  }
  const kept = history.slice(start).filter((e): e is TranscriptMessage => e.type === 'message');
  return { blocks, ...(blocks.length ? { summary: blocks.join('\n\n') } : {}), kept, compactionIndex };
}

/** The text of the first summary block (the only one of a session compacted before blocks existed). */
export function summaryMessage(summary: string): string {
  return `Summary of the earlier conversation (older messages were compacted into it):\n\n${summary}`;
}

/** The text of a block after the first: it never mentions how many blocks there are, so it never changes. */
export function laterSummaryMessage(summary: string): string {
  return `Summary of the part of the conversation that followed (compacted later):\n\n${summary}`;
}

/** The system message's content: the system prompt, then each block, and where each stable part ends. */
export interface SystemWithBlocks {
  content: string;
  /** End offsets of the system prompt and of each block in `content` (see `ChatMessage.cacheBreaks`). */
  cacheBreaks: number[];
  /** The text after the system prompt (the blocks with their separators); '' without blocks. */
  blocksText: string;
}

/**
 * The system prompt with the summary blocks appended, oldest first, each after a blank line. A new block only
 * adds text at the end, so every earlier byte (and cache breakpoint) stays where it was.
 */
export function systemWithBlocks(system: string, blocks: readonly string[]): SystemWithBlocks {
  const cacheBreaks = [system.length];
  let blocksText = '';
  blocks.forEach((block, i) => {
    blocksText += `\n\n${i === 0 ? summaryMessage(block) : laterSummaryMessage(block)}`;
    cacheBreaks.push(system.length + blocksText.length);
  });
  return { content: system + blocksText, cacheBreaks, blocksText };
}
