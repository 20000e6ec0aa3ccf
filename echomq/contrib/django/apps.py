from django.apps import AppConfig


class EchoMQConfig(AppConfig):
    name = "echomq.contrib.django"
    label = "echomq"
    verbose_name = "EchoMQ queues"
