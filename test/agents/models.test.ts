import { describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/config/resolved.ts';
import { agentForModel, routableModels } from '../../src/http/openai-request.ts';

const agent = (id: string, model: string) => ({ id, model, providerId: 'default' }) as AgentConfig;

describe('the models /v1/models may list', () => {
  it('lists the agents, then each agent model once, and every listed name routes to an agent', () => {
    const agents = [agent('main', 'gpt-a'), agent('work', 'GPT-B'), agent('extra', 'gpt-a')];
    const listed = routableModels(agents);
    expect(listed.map((m) => [m.id, m.kind, m.agent.id])).toEqual([
      ['main', 'agent', 'main'], ['work', 'agent', 'work'], ['extra', 'agent', 'extra'], ['gpt-a', 'model', 'main'], ['GPT-B', 'model', 'work'],
    ]);
    for (const m of listed) expect([m.id, agentForModel(agents, m.id)?.id]).toEqual([m.id, m.agent.id]);
    // A model no agent is configured with (a provider's default) is not listed and does not route.
    expect(agentForModel(agents, 'gpt-provider-default')).toBeUndefined();
  });
});
