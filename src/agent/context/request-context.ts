import { ProviderError } from '../../core/errors.ts';
import type { ChatMessage } from '../../providers/types.ts';
import { chatMessageTokens, countRequestTokens } from '../../tokens/tokens.ts';
import type { InputComponents } from '../turn-events.ts';
import type { BuiltContext } from './context.ts';

/** A context of ad-hoc messages (the staged summary calls), counted like a request. */
export function adHocContext(messages: ChatMessage[], model: string, component: keyof InputComponents): BuiltContext {
  const messageTokens = messages.map((m) => chatMessageTokens(m, model));
  const tokens = countRequestTokens(messages, [], model);
  const components: InputComponents = { system: 0, bootstrap: 0, tools: 0, history: 0, toolResults: 0, userInput: 0, images: 0 };
  components[component] = tokens;
  return { messages, components, tokens, messageTokens, toolTokens: [], kept: [] };
}

/**
 * A request with an instruction of ours after the conversation (the memory flush, the summary request). When
 * the conversation ends with a user message the instruction joins it, so the request never has two user
 * messages in a row (some chat templates refuse that); counted as the system component.
 */
export function withInstruction(base: BuiltContext, instruction: string, model: string): BuiltContext {
  const last = base.messages.at(-1);
  if (last?.role !== 'user') return extendContext(base, [{ role: 'user', content: instruction }], model, 'system');
  const merged: ChatMessage = { ...last, content: `${last.content}\n\n${instruction}` };
  const mergedTokens = chatMessageTokens(merged, model);
  const added = mergedTokens - (base.messageTokens.at(-1) ?? 0);
  return {
    ...base, messages: [...base.messages.slice(0, -1), merged], messageTokens: [...base.messageTokens.slice(0, -1), mergedTokens],
    components: { ...base.components, system: base.components.system + added }, tokens: base.tokens + added,
  };
}

/** A context with messages appended (the flush's own tool rounds), counted into one component. */
export function extendContext(base: BuiltContext, messages: ChatMessage[], model: string, component: keyof InputComponents = 'toolResults'): BuiltContext {
  const tokens = messages.map((m) => chatMessageTokens(m, model));
  const sum = tokens.reduce((a, b) => a + b, 0);
  return {
    ...base, messages: [...base.messages, ...messages], messageTokens: [...base.messageTokens, ...tokens],
    components: { ...base.components, [component]: base.components[component] + sum }, tokens: base.tokens + sum,
  };
}

/** True for a provider error that says the request is longer than the model's window. */
export function isContextOverflow(error: unknown): boolean {
  return error instanceof ProviderError && error.code === 'CONTEXT_OVERFLOW';
}
