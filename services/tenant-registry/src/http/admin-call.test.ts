import { describe, expect, it } from 'vitest';
import { describeAdminCall } from './admin-call';

const ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

describe('describeAdminCall', () => {
  it.each([
    ['POST', '/tenants', 'create', null],
    ['GET', '/tenants', 'list', null],
    ['HEAD', '/tenants/', 'list', null],
    ['DELETE', '/tenants', 'unknown', null],
    ['GET', `/tenants/${ID}`, 'get', ID],
    ['POST', `/tenants/${ID}`, 'unknown', ID],
    ['PATCH', `/tenants/${ID}`, 'update', ID],
    ['DELETE', `/tenants/${ID}/`, 'delete', ID],
    ['POST', `/tenants/${ID}/disable`, 'disable', ID],
    ['POST', `/tenants/${ID}/enable`, 'enable', ID],
    ['POST', `/tenants/${ID}/jwt_secret/rotate`, 'rotate', ID],
    ['POST', `/tenants/${ID}/jwt_secret/expire_previous`, 'expire_previous', ID],
    ['POST', `/TENANTS/${ID}/JWT_SECRET/REVOKE_ALL/`, 'revoke_all', ID],
    ['POST', `/tenants/${ID}/host_sync/rotate`, 'rotate_host_sync', ID],
    ['GET', `/tenants/${ID}/disable`, 'unknown', ID],
    ['POST', `/tenants/${ID.toUpperCase()}/disable`, 'disable', null],
    ['POST', '/tenants/%ZZ/disable', 'disable', null],
    ['POST', `/tenants/${ID}/jwt_secret`, 'unknown', ID],
    ['GET', `/tenants/${ID}/channel_rules`, 'get_channel_rules', ID],
    ['PUT', `/tenants/${ID}/channel_rules/`, 'set_channel_rules', ID],
    ['DELETE', `/tenants/${ID}/CHANNEL_RULES`, 'reset_channel_rules', ID],
    ['POST', `/tenants/${ID}/channel_rules`, 'unknown', ID],
    ['GET', `/tenants/${ID}/limits`, 'get_limits', ID],
    ['PUT', `/tenants/${ID}/limits`, 'set_limits', ID],
    ['PATCH', `/tenants/${ID}/LIMITS/`, 'update_limits', ID],
    ['DELETE', `/tenants/${ID}/limits`, 'unknown', ID],
    ['GET', '/plans', 'list_plans', null],
    ['POST', '/plans', 'unknown', null],
    ['GET', '/plans/pro', 'get_plan', null],
    ['PUT', '/plans/pro', 'put_plan', null],
    ['DELETE', '/plans/pro/', 'delete_plan', null],
    ['GET', '/plans/pro/x', 'unknown', null],
    ['GET', '/audit', 'audit', null],
    ['POST', '/audit', 'unknown', null],
    ['GET', '/', 'unknown', null],
    ['GET', '/nope', 'unknown', null],
  ])('%s %s is %s on %s', (method, path, action, tenantId) => {
    expect(describeAdminCall(method, path)).toEqual({ action, tenantId });
  });
});
