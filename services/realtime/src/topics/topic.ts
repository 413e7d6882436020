import { isCanonicalUuid } from '@service-relay/core';
import { CHANNEL_NAME } from '@service-relay/channels';
import type { ChannelRef } from '../messaging/message';

export type TopicCheck = { ok: true; ref: ChannelRef } | { ok: false; code: 'invalid_topic' | 'forbidden_topic' };

const TOPIC_SHAPE = /^tenants\/([^/]+)\/channels\/([^/]+)$/;

/**
 * A topic is `tenants/{tenant_id}/channels/{channel}`. The tenant comes from the
 * verified token; a topic naming any other tenant is refused the same way
 * whether or not that tenant exists, so nothing about it is revealed.
 */
export function checkTopic(topic: unknown, tenantId: string): TopicCheck {
  if (typeof topic !== 'string') return { ok: false, code: 'invalid_topic' };
  const m = TOPIC_SHAPE.exec(topic);
  if (!m || !isCanonicalUuid(m[1]) || !CHANNEL_NAME.test(m[2]!)) return { ok: false, code: 'invalid_topic' };
  if (m[1] !== tenantId) return { ok: false, code: 'forbidden_topic' };
  return { ok: true, ref: { tenantId, channel: m[2]! } };
}

export function topicOf(ref: ChannelRef): string {
  return `tenants/${ref.tenantId}/channels/${ref.channel}`;
}
