# Mnemo: data in the /data volume, skills mounted at /skills, configuration from
# the environment (secrets only there) and optionally a YAML file: mount it and
# set MNEMO_CONFIG to its path (e.g. -v ./mnemo.yaml:/config/mnemo.yaml
# -e MNEMO_CONFIG=/config/mnemo.yaml).
#
# Stopping: SIGTERM starts a graceful stop in which turns in flight get
# `shutdown_grace` seconds (default 20). Docker kills the container after its
# own stop timeout (10 s unless told), so run it with `--stop-timeout 30` (or
# `stop_grace_period: 30s` in compose), at least shutdown_grace plus a few seconds.
#
# The user's uid/gid are build arguments: build with --build-arg UID=$(id -u)
# --build-arg GID=$(id -g) so a bind-mounted ./skills folder is writable (admins
# promoting skills write there).
FROM python:3.11-slim

ARG UID=10001
ARG GID=10001

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    MNEMO_HOME=/data \
    MNEMO_SKILLS_DIR=/skills \
    MNEMO_HEALTH_ENABLED=true \
    MNEMO_HEALTH_LISTEN=0.0.0.0

RUN groupadd --gid "${GID}" mnemo \
    && useradd --create-home --uid "${UID}" --gid "${GID}" mnemo

WORKDIR /app
# The locked dependencies first, in a layer of their own: a code change reuses it.
COPY requirements.lock ./
RUN pip install --no-cache-dir -r requirements.lock
COPY pyproject.toml setup.py README.md ./
COPY gateway ./gateway
COPY memory_core ./memory_core
RUN pip install --no-cache-dir --no-deps -c requirements.lock .

# Bundled skills are the default content of the mountable skills folder.
COPY --chown=mnemo:mnemo skills /skills
COPY config/mnemo.example.yaml /config/mnemo.example.yaml
RUN mkdir -p /data && chown mnemo:mnemo /data

USER mnemo
WORKDIR /data
VOLUME ["/data", "/skills"]
EXPOSE 8080

# Ready only when every platform is connected and the storage answers: /data writable,
# or PostgreSQL reachable with storage.url (see /healthz).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status == 200 else 1)"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["mnemo"]
CMD ["run"]
