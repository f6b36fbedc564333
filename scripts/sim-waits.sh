#!/bin/bash
# While a simulation runs (its cluster on port 31433), prints every 5 s what the sim database's
# busy backends are doing and waiting on, most common first. For finding out why a soak's
# requests stop getting through (docs/simulation.md, "The soak").
port="${1:-31433}"
while true; do
  psql -h 127.0.0.1 -p "$port" -U postgres -d sim -At -F ' | ' -c "
    select now()::time(0), state, coalesce(wait_event_type, '-'), coalesce(wait_event, '-'),
           left(regexp_replace(query, '\s+', ' ', 'g'), 90), count(*)
      from pg_stat_activity
     where datname = 'sim' and state <> 'idle' and pid <> pg_backend_pid()
     group by 1, 2, 3, 4, 5 order by 6 desc limit 8" 2>/dev/null
  echo ---
  sleep 5
done
