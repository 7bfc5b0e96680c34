-- random-keys.lua: wrk requests GET /scale/%010d for random i in [0, NKEYS),
-- the keys tools/mkindex writes (bench/run.sh's scale rows).
local n = tonumber(os.getenv("NKEYS"))
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  return wrk.format("GET", string.format("/scale/%010d", math.random(0, n - 1)))
end
