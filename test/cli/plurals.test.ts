import { describe, expect, it } from 'vitest';
import type { TurnEndEvent } from '../../src/agent/turn-events.ts';
import { turnLogObserver } from '../../src/accounting/turn-log.ts';
import { formatCounts } from '../../src/cli/migrate-command.ts';
import { emptyCounts } from '../../src/cluster/state-import.ts';
import { capturingLogger } from '../helpers/log-capture.ts';

describe('counts read as English', () => {
  it('migrate: one of each is singular, several are plural', () => {
    const one = formatCounts({ ...emptyCounts(), transcripts: 1, transcriptEntries: 1, skippedLines: 1, skippedTranscripts: 1, skippedMessages: 1 }, 'postgres://u@h/db');
    expect(one).toContain('  transcripts           1 (0 archived), 1 entry\n');
    expect(one).toContain('  skipped 1 unreadable line (a torn last line after a crash?)\n');
    expect(one).toContain('  skipped 1 transcript with no header and no session entry naming its key\n');
    expect(one).toContain('  skipped 1 pending message whose session key cannot be built\n');
    const many = formatCounts({ ...emptyCounts(), transcripts: 2, transcriptEntries: 1200, skippedLines: 2, skippedTranscripts: 3, skippedMessages: 4 }, 'postgres://u@h/db');
    expect(many).toContain('  transcripts           2 (0 archived), 1,200 entries\n');
    expect(many).toContain('  skipped 2 unreadable lines (a torn last line after a crash?)\n');
    expect(many).toContain('  skipped 3 transcripts with no header and no session entry naming their key\n');
    expect(many).toContain('  skipped 4 pending messages whose session key cannot be built\n');
    expect(formatCounts(emptyCounts(), 'postgres://u@h/db')).not.toContain('skipped');
  });

  it('the turn log line says "1 token", "2 tokens"', () => {
    const { logger, lines } = capturingLogger('info');
    const observer = turnLogObserver(logger);
    const event = (output: number) => ({
      correlationId: 'c', channel: 'webchat', sessionKey: 'agent:main:main', sessionId: 's', durationMs: 5, outcome: 'replied',
      usage: { inputTokens: 0, outputTokens: output, cacheReadTokens: 0, cacheWriteTokens: 0 },
    }) as unknown as TurnEndEvent;
    observer.onTurnEnd!(event(1));
    observer.onTurnEnd!(event(2));
    expect(lines.map((l) => l.msg)).toEqual(['turn replied in 5 ms, 1 token', 'turn replied in 5 ms, 2 tokens']);
  });
});
