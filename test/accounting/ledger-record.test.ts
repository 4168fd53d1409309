import { describe, expect, it } from 'vitest';
import { ledgerRecordOf, parseLedgerLine, recordTotal } from '../../src/accounting/ledger-record.ts';
import { llmCall } from './records.ts';

/** The record of `llmCall()`, as SPEC §4 writes it: literal values, in the literal field order. */
const EXPECTED_LINE = '{"correlationId":"corr-1","sessionKey":"agent:main:main","sessionId":"sid-1","channel":"telegram","agentId":"main",'
  + '"providerId":"default","modelId":"gpt-test","inputTokens":100,"outputTokens":20,"cacheReadTokens":30,"cacheWriteTokens":5,'
  + '"estimatedInputTokensByComponent":{"system":50,"bootstrap":10,"tools":5,"history":30,"toolResults":0,"userInput":40},'
  + '"isEstimated":false,"kind":"turn","timestamp":"2025-01-02T03:04:05.000Z"}';

describe('ledgerRecordOf', () => {
  it('writes exactly the SPEC fields, in order, with the event values', () => {
    expect(JSON.stringify(ledgerRecordOf(llmCall()))).toBe(EXPECTED_LINE);
  });

  it('keeps each input component apart (no component is another one)', () => {
    const record = ledgerRecordOf(llmCall({ estimatedInputTokensByComponent: { system: 1, bootstrap: 2, tools: 3, history: 4, toolResults: 5, userInput: 6, images: 0 } }));
    expect(record.estimatedInputTokensByComponent).toEqual({ system: 1, bootstrap: 2, tools: 3, history: 4, toolResults: 5, userInput: 6 });
    expect(Object.keys(record.estimatedInputTokensByComponent)).toEqual(['system', 'bootstrap', 'tools', 'history', 'toolResults', 'userInput']);
  });

  it('drops fields of the event that are not ledger fields (retries, duration, error, extra components)', () => {
    const event = { ...llmCall({ retries: 3, durationMs: 999, error: 'PROVIDER_TIMEOUT' }), extra: 1 };
    (event.estimatedInputTokensByComponent as unknown as Record<string, number>).video = 7;
    expect(JSON.stringify(ledgerRecordOf(event))).toBe(EXPECTED_LINE);
  });

  it('a request with images adds an images component after the six of SPEC §4 (SPEC §15); without images there is none', () => {
    const withImages = llmCall();
    withImages.estimatedInputTokensByComponent.images = 765;
    expect(JSON.stringify(ledgerRecordOf(withImages))).toBe(EXPECTED_LINE.replace('"userInput":40}', '"userInput":40,"images":765}'));
    expect(JSON.stringify(ledgerRecordOf(llmCall()))).toBe(EXPECTED_LINE);
  });

  it('each usage count lands in its own field', () => {
    const record = ledgerRecordOf(llmCall({ usage: { inputTokens: 11, outputTokens: 22, cacheReadTokens: 33, cacheWriteTokens: 44 } }));
    expect([record.inputTokens, record.outputTokens, record.cacheReadTokens, record.cacheWriteTokens]).toEqual([11, 22, 33, 44]);
  });

  it('the parent correlation id and the tool calls are written when present, after the SPEC fields', () => {
    const line = JSON.stringify(ledgerRecordOf(llmCall({ parentCorrelationId: 'parent-9', toolCalls: ['memory_write', 'sessions_spawn'], kind: 'compaction', isEstimated: true })));
    expect(line).toBe(`${EXPECTED_LINE.slice(0, -1).replace('"isEstimated":false,"kind":"turn"', '"isEstimated":true,"kind":"compaction"')},"parentCorrelationId":"parent-9","toolCalls":["memory_write","sessions_spawn"]}`);
  });

  it('an empty parent id or tool list is left out', () => {
    expect(JSON.stringify(ledgerRecordOf(llmCall({ parentCorrelationId: '', toolCalls: [] })))).toBe(EXPECTED_LINE);
  });

  it('the timestamp is ISO 8601 UTC with milliseconds', () => {
    expect(ledgerRecordOf(llmCall({ at: Date.UTC(2026, 11, 31, 23, 59, 59, 7) })).timestamp).toBe('2026-12-31T23:59:59.007Z');
  });
});

describe('recordTotal', () => {
  it('adds the four counts', () => {
    expect(recordTotal({ inputTokens: 1, outputTokens: 20, cacheReadTokens: 300, cacheWriteTokens: 4000 })).toBe(4321);
  });
});

describe('parseLedgerLine', () => {
  it('reads a record line back as written', () => {
    expect(parseLedgerLine(EXPECTED_LINE)).toEqual(JSON.parse(EXPECTED_LINE));
    expect(parseLedgerLine(`  ${EXPECTED_LINE}  `)).toEqual(JSON.parse(EXPECTED_LINE));
  });

  it('zero counts are counts', () => {
    const zero = EXPECTED_LINE.replace('"inputTokens":100,"outputTokens":20,"cacheReadTokens":30,"cacheWriteTokens":5', '"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheWriteTokens":0');
    expect(parseLedgerLine(zero)).toMatchObject({ inputTokens: 0, cacheWriteTokens: 0 });
  });

  const edit = (field: string, value: unknown) => {
    const r = JSON.parse(EXPECTED_LINE) as Record<string, unknown>;
    if (value === undefined) delete r[field];
    else r[field] = value;
    return JSON.stringify(r);
  };

  it.each([
    ['an empty line', ''],
    ['a blank line', '   '],
    ['a torn line', EXPECTED_LINE.slice(0, 40)],
    ['null', 'null'],
    ['a number', '42'],
    ['a string', '"text"'],
    ['no session key', edit('sessionKey', undefined)],
    ['a numeric session key', edit('sessionKey', 5)],
    ['no correlation id', edit('correlationId', undefined)],
    ['no provider', edit('providerId', undefined)],
    ['no input tokens', edit('inputTokens', undefined)],
    ['negative output tokens', edit('outputTokens', -1)],
    ['text cache reads', edit('cacheReadTokens', '30')],
    ['no cache writes', edit('cacheWriteTokens', undefined)],
    ['null input tokens', edit('inputTokens', null)],
  ])('refuses %s', (_name, line) => {
    expect(parseLedgerLine(line)).toBeUndefined();
  });

  it('refuses counts that are not finite (JSON cannot say Infinity, a number too large becomes it)', () => {
    expect(parseLedgerLine(EXPECTED_LINE.replace('"inputTokens":100', '"inputTokens":1e999'))).toBeUndefined();
  });
});
