FROM python:3.11-slim-bookworm
WORKDIR /opt/quire
COPY . .
RUN pip install --no-cache-dir .
EXPOSE 9092
VOLUME ["/data"]
ENTRYPOINT ["quire"]
CMD ["standalone", "--data-dir", "/data", "--host", "0.0.0.0", "--port", "9092"]
