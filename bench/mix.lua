-- bench/mix.lua: the WORKLOAD.md mix for wrk, to cross-check `pith bench http`.
-- 99 % GET /api/v1/topics/{id}, ids uniform over 1..PITH_TOPICS; with
-- PITH_BENCH_TOKEN set, PITH_WRITE_RATIO (default 0.01) of requests are
-- POST /api/v1/topics/{id}/posts with a 150-character body.
-- PITH_ACCEPT_GZIP=1 adds Accept-Encoding: gzip to reads.
-- wrk measures a closed loop: coordinated omission is not corrected.

local topics = tonumber(os.getenv("PITH_TOPICS") or "1000")
local token = os.getenv("PITH_BENCH_TOKEN")
if token == "" then token = nil end
local write_ratio = tonumber(os.getenv("PITH_WRITE_RATIO") or "0.01")
local read_headers = {}
if os.getenv("PITH_ACCEPT_GZIP") == "1" then
  read_headers["Accept-Encoding"] = "gzip"
end
local post_headers = { ["Content-Type"] = "application/json" }
if token then
  post_headers["Authorization"] = "Bearer " .. token
end
-- 15 characters, ten times: 150 characters of text.
local post_body = '{"body":"' .. string.rep("wrk bench post ", 10) .. '"}'

local next_id = 1
function setup(thread)
  thread:set("thread_id", next_id)
  next_id = next_id + 1
end

function init(args)
  math.randomseed(7919 * (thread_id or 1) + os.time())
end

function request()
  local path = "/api/v1/topics/" .. math.random(1, topics)
  if token and math.random() < write_ratio then
    return wrk.format("POST", path .. "/posts", post_headers, post_body)
  end
  return wrk.format("GET", path, read_headers)
end
