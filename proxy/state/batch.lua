-- A state batch, applied atomically and in order (runguard.proxy.state.redis).
--
-- KEYS[1..n]  the hashes of the scopes the batch touches, e.g. rg:{run:abc}
-- KEYS[n+1]   the batch's own marker, e.g. rg:{run:abc}:once:3f9a0c1d2e4b5a69 (a new name per batch)
-- ARGV[1]     a JSON array, flat: first each key's TTL in milliseconds (the scopes' refreshed after
--             the ops, the marker's set with the reply), then the ops, each the number of its
--             scope's key (1..n), an opcode, a field and the opcode's arguments:
--   a field amount                      Add: the sum, as a number
--   r field value                       Raise: the larger of the number and value
--   p field keep flags count item...    Push (flags: 1 unique + 2 head): the window
--   g field                             Get
--   u field value                       Put a string: the previous value
--   d field                             Put None (delete the field): the previous value
--   x field value                       PutNX: the value now stored
--   c field expected value              CompareAndSet: the value stored afterwards
--   n field value                       CompareAndSet with expected None
--
-- A field's stored form says its type, so every value reads back as the type it was written as:
--   s<text>        a string
--   w<json array>  a window of strings, oldest first
--   <number>       anything else: a number, written so tonumber() gives back the exact double
-- Results are the stored forms (false: absent) and the Python side decodes them. Numbers are
-- summed here in Lua doubles, not with HINCRBYFLOAT (long double, rounded to 17 decimals), so
-- a sum is bit for bit the one MemoryState computes.
--
-- The marker makes a batch run once. The client sends a call again when its connection broke
-- before the reply came; if the batch had run, its additions and pushes would count twice. So a
-- batch keeps its reply under its marker for a while, and a batch whose marker is there has run:
-- it answers with that reply and changes nothing.

local marker = #KEYS
local done = redis.call('GET', KEYS[marker])
if done then
  return cjson.decode(done)
end
local results = {}
local ops = cjson.decode(ARGV[1])
local i = #KEYS + 1
local n = #ops
local S, W = 115, 119 -- string.byte('s'), string.byte('w')

local function number_form(x)
  local text = string.format('%.15g', x)
  if tonumber(text) ~= x then
    text = string.format('%.17g', x)
  end
  return text
end

while i <= n do
  local key = KEYS[ops[i]]
  i = i + 1 -- from here on an op reads as it would alone: opcode, field, arguments
  local code, field = ops[i], ops[i + 1]
  local raw = redis.call('HGET', key, field)
  if code == 'a' then
    local tag = raw and string.byte(raw, 1)
    local current = (raw and tag ~= S and tag ~= W) and tonumber(raw) or 0
    local text = number_form(current + tonumber(ops[i + 2]))
    redis.call('HSET', key, field, text)
    results[#results + 1] = text
    i = i + 3
  elseif code == 'p' then
    local keep, flags, count = ops[i + 2], ops[i + 3], ops[i + 4]
    local unique, head = flags % 2 == 1, flags >= 2
    local window = {}
    if raw and string.byte(raw, 1) == W then
      window = cjson.decode(string.sub(raw, 2))
    end
    local size = #window
    for j = i + 5, i + 4 + count do
      local item = ops[j]
      local skip = head and size >= keep
      if unique and not skip then
        for k = 1, size do
          if window[k] == item then
            skip = true
            break
          end
        end
      end
      if not skip then
        size = size + 1
        window[size] = item
      end
    end
    if size > keep then -- keep the last `keep` items
      local kept = {}
      for k = math.max(size - keep, 0) + 1, size do
        kept[#kept + 1] = window[k]
      end
      window = kept
    end
    local text = (#window == 0) and 'w[]' or ('w' .. cjson.encode(window))
    redis.call('HSET', key, field, text)
    results[#results + 1] = text
    i = i + 5 + count
  elseif code == 'g' then
    results[#results + 1] = raw
    i = i + 2
  elseif code == 'u' then
    redis.call('HSET', key, field, 's' .. ops[i + 2])
    results[#results + 1] = raw
    i = i + 3
  elseif code == 'd' then
    redis.call('HDEL', key, field)
    results[#results + 1] = raw
    i = i + 2
  elseif code == 'x' then
    if not raw then
      raw = 's' .. ops[i + 2]
      redis.call('HSET', key, field, raw)
    end
    results[#results + 1] = raw
    i = i + 3
  elseif code == 'c' or code == 'n' then
    local expected, value = false, nil
    if code == 'c' then
      expected, value = 's' .. ops[i + 2], ops[i + 3]
      i = i + 4
    else
      value = ops[i + 2]
      i = i + 3
    end
    if raw == expected then
      raw = 's' .. value
      redis.call('HSET', key, field, raw)
    end
    results[#results + 1] = raw
  elseif code == 'r' then
    local tag = raw and string.byte(raw, 1)
    local current = (raw and tag ~= S and tag ~= W) and tonumber(raw) or 0
    local value = tonumber(ops[i + 2])
    local text = raw
    if not raw or tag == S or tag == W or current < value then
      text = number_form(math.max(current, value))
      redis.call('HSET', key, field, text)
    end
    results[#results + 1] = text
    i = i + 3
  else
    return redis.error_reply('runguard batch: unknown opcode ' .. tostring(code))
  end
end

for k = 1, marker - 1 do
  redis.call('PEXPIRE', KEYS[k], ops[k])
end
redis.call('SET', KEYS[marker], cjson.encode(results), 'PX', ops[marker])
return results
