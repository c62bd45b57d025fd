# Mnemo: data in the /data volume, skills mounted at /skills, configuration from
# the environment (secrets only there) and optionally a YAML file: mount it and
# set MNEMO_CONFIG to its path (e.g. -v ./mnemo.yaml:/config/mnemo.yaml
# -e MNEMO_CONFIG=/config/mnemo.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    MNEMO_HOME=/data \
    MNEMO_SKILLS_DIR=/skills

RUN useradd --create-home --uid 10001 mnemo

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY memory_core ./memory_core
RUN pip install --no-cache-dir .

# Bundled skills are the default content of the mountable skills folder.
COPY --chown=mnemo:mnemo skills /skills
COPY config/mnemo.example.yaml /config/mnemo.example.yaml
RUN mkdir -p /data && chown mnemo:mnemo /data

USER mnemo
WORKDIR /data
VOLUME ["/data", "/skills"]

ENTRYPOINT ["mnemo"]
CMD ["run"]
