#!/bin/sh
# P1: run once by the postgres image when its volume is new (compose.yaml): the roles of
# docs/security.md, "Database roles". The owner runs the migrations; the app's login owns nothing.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v owner_password="$VERBATIM_OWNER_PASSWORD" -v app_password="$VERBATIM_APP_PASSWORD" <<'SQL'
create role verbatim_owner login password :'owner_password';
create database verbatim owner verbatim_owner;
create role verbatim_tenant nologin nobypassrls;
create role verbatim_all_workspaces nologin nobypassrls;
grant verbatim_tenant, verbatim_all_workspaces to verbatim_owner;
create role verbatim_app login noinherit password :'app_password';
grant verbatim_tenant, verbatim_all_workspaces to verbatim_app;
SQL
